"""`subrun run`'s own temporary Prefect API (flows.private_api): booted before the command's
imports, answering when the flow starts, never taken for a served API, gone when the command
ends; and not started at all when a server is configured."""

from __future__ import annotations

import os

import psutil
import pytest
import requests

from flows.private_api import PRIVATE, private_api, wait_ready


def test_the_commands_own_api_answers_is_not_a_server_and_ends_with_the_command(
        monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with private_api():
        url = os.environ["PREFECT_API_URL"]
        assert os.environ[PRIVATE] == url and url.startswith("http://127.0.0.1:")
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        assert len(started) == 1 and "uvicorn" in started[0].cmdline()
        wait_ready()
        assert requests.get(f"{url}/health", timeout=5).ok
        from flows.holders import server_in_use

        assert not server_in_use()  # no slots, no deployment cancellation to watch
    assert "PREFECT_API_URL" not in os.environ and PRIVATE not in os.environ
    assert not started[0].is_running()


def test_a_configured_server_is_used_and_nothing_is_started(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.delenv(PRIVATE, raising=False)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with private_api():
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:4200/api"
        assert PRIVATE not in os.environ
        wait_ready()  # nothing of its own to wait for
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
