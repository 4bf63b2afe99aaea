"""`make lab-down` (scripts/testlab.py down) stops what campaigns left running on the lab's hosts,
such as a power daemon, which outlives its campaign by design; a recorded pid that now belongs
to another process is left alone."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from types import ModuleType

import pytest

from lab.local import LocalHost

ROOT = Path(__file__).resolve().parent.parent


def load_testlab(lab: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """scripts/testlab.py loaded with its lab folder at `lab`."""
    monkeypatch.setenv("SUBRUN_LAB_DIR", str(lab))
    spec = importlib.util.spec_from_file_location("testlab_under_test",
                                                  ROOT / "scripts" / "testlab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lab_down_stops_a_daemon_left_running_and_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = LocalHost("local", str(tmp_path / "hosts" / "local"))
    daemon = host.start_detached(["sleep", "300"], name="power-daemon-left")
    deadline = time.monotonic() + 10
    while not (Path(host.detached_dir("power-daemon-left")) / "start").exists():
        assert time.monotonic() < deadline, "the detached process never recorded its start"
        time.sleep(0.05)
    reused = tmp_path / "hosts" / "h2" / "detached" / "subrun-old-run"
    reused.mkdir(parents=True)  # its pid is now this test's process: a different start time
    (reused / "pid").write_text(f"{os.getpid()}\n")
    (reused / "start").write_text("1\n")

    load_testlab(tmp_path, monkeypatch).stop_detached()
    assert not host.poll_detached(daemon).running
    assert host.poll_detached(daemon).exit_status == 143  # TERM, through its supervisor
