"""`subrun run`'s own temporary Prefect API (flows.private_api): booted before the command's
imports, answering when the flow starts, never taken for a served API, gone when the command
ends; and not started at all when a server is configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from prefect.settings import get_current_settings

from flows.private_api import PRIVATE, flow_run_settings, private_api, wait_ready

ROOT = Path(__file__).resolve().parent.parent


# a command's process, as `subrun run` is one: the API started before Prefect is imported
COMMAND = """
import json, os, psutil, requests
from prefect.settings import get_current_settings

from flows.private_api import PRIVATE, flow_run_settings, private_api, wait_ready
with private_api():
    from flows.holders import server_in_use
    wait_ready()
    from prefect import flow
    from prefect.settings import get_current_settings

    @flow
    def answer() -> int:
        return get_current_settings().flows.heartbeat_frequency or 42

    with flow_run_settings():  # no heartbeats to an API that ends with the command
        flow_result = answer()
    url = os.environ["PREFECT_API_URL"]
    print(json.dumps({"url": url, "private": os.environ.get(PRIVATE), "flow": flow_result,
                      "health": requests.get(url + "/health", timeout=5).ok,
                      "in_use": server_in_use(),
                      "api": [p.pid for p in psutil.Process().children(recursive=True)
                              if "uvicorn" in p.cmdline()]}), flush=True)
print(json.dumps({"after": os.environ.get("PREFECT_API_URL")}), flush=True)
"""


def test_the_commands_own_api_answers_is_not_a_server_and_ends_with_the_command(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", PRIVATE)}
    env["PREFECT_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", COMMAND], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    inside, after = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert inside["url"] == inside["private"] and inside["url"].startswith("http://127.0.0.1:")
    assert inside["health"] and not inside["in_use"]  # no slots, no cancellation to watch
    assert inside["flow"] == 42  # the flow ran on it, with no heartbeat frequency set
    assert len(inside["api"]) == 1 and not psutil.pid_exists(inside["api"][0])
    assert after["after"] is None


def test_a_configured_server_is_used_and_nothing_is_started(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv(PRIVATE, raising=False)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with private_api():
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:4200/api"
        assert PRIVATE not in os.environ
        wait_ready()  # nothing of its own to wait for
        with flow_run_settings():  # a server's flow runs keep their heartbeats
            assert get_current_settings().flows.heartbeat_frequency == 180
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


@pytest.mark.parametrize("where", ["profile", "prefect.toml"])
def test_an_api_set_in_a_profile_or_settings_file_is_left_to_prefect(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    monkeypatch.delenv(PRIVATE, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path)
    url = 'PREFECT_API_URL = "http://127.0.0.1:4200/api"\n'
    if where == "profile":
        (tmp_path / "home" / "profiles.toml").write_text(
            f'active = "lab"\n[profiles.lab]\n{url}[profiles.ephemeral]\n')
    else:
        (tmp_path / "prefect.toml").write_text('[api]\nurl = "http://127.0.0.1:4200/api"\n')
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with private_api():
        assert "PREFECT_API_URL" not in os.environ and PRIVATE not in os.environ
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_an_api_that_exits_while_booting_is_one_clear_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from flows import private_api as module
    from lab.errors import SubrunError

    for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH", PRIVATE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(module, "_launch", lambda fd: subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(3)"]))
    with private_api(), pytest.raises(SubrunError, match="exited with status 3 before it"):
        wait_ready(timeout_s=60)
