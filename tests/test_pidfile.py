"""A pid file names one process: a stale one (its pid now someone else's) is never signalled."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lab import pidfile


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process, as the one that inherits a stale pid would be."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a group leader, too
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).cmdline() != ["sleep", "60"]:  # until its exec is done
        assert time.monotonic() < deadline, "sleep did not start"
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_record_matches_only_the_process_it_was_written_for(
        tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "x.pid"
    pidfile.write(path, stranger.pid, ["sleep", "60"])
    record = pidfile.read(path)
    assert record is not None and pidfile.process(record) is not None
    assert pidfile.process(record, ("sleep", "60")) is not None
    assert pidfile.process(record, ("prefect",)) is None
    earlier = pidfile.PidRecord(record.pid, (record.started or 0) - 5, record.cmdline)
    assert pidfile.process(earlier) is None  # same pid, started at another time: someone else
    other = pidfile.PidRecord(record.pid, record.started, ("python", "-m", "prefect"))
    assert pidfile.process(other) is None


@pytest.mark.parametrize("style", ["recorded", "bare"])
def test_server_stop_leaves_a_process_that_took_the_pid_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stranger: subprocess.Popen[bytes],
        style: str) -> None:
    from flows import server

    monkeypatch.setenv("SUBRUN_HOME", str(tmp_path))
    path = tmp_path / "prefect-server-4299.pid"
    if style == "bare":  # what older versions wrote
        path.write_text(f"{stranger.pid}\n")
    else:  # the server that had the pid, started earlier with its own command line
        path.write_text(json.dumps({"pid": stranger.pid, "started": 1.0e9, "cmdline": [
            "python", "-m", "prefect", "server", "start", "--port", "4299"]}))
    assert server.stop(4299) is False
    assert not path.exists()  # the stale file is gone
    assert psutil.Process(stranger.pid).status() != psutil.STATUS_ZOMBIE
    assert stranger.poll() is None  # and the stranger was not signalled
