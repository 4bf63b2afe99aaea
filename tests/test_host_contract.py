"""One contract, two transports: every test here runs over LocalHost and over real SSH."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest

from lab.errors import CommandFailed, CommandTimedOut
from lab.host import Host

pytestmark = pytest.mark.lab


def test_run_returns_output_and_status(any_host: Host) -> None:
    result = any_host.run(["sh", "-c", "echo out; echo err >&2; exit 0"])
    assert result.ok and result.exit_status == 0
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"
    assert result.host == any_host.name


def test_failure_raises_with_output_tail(any_host: Host) -> None:
    with pytest.raises(CommandFailed) as caught:
        any_host.run(["sh", "-c", "echo why-it-failed; exit 7"])
    assert caught.value.result.exit_status == 7
    assert "why-it-failed" in str(caught.value)
    assert any_host.name in str(caught.value)
    unchecked = any_host.run(["sh", "-c", "exit 3"], check=False)
    assert unchecked.exit_status == 3


def test_argv_is_passed_literally(any_host: Host) -> None:
    tricky = ["a b", "'quoted'", '"dq"', "$HOME", "x;rm -rf /nonexistent", "*", ""]
    result = any_host.run(["printf", "%s|", *tricky])
    assert result.stdout == "|".join(tricky) + "|"


def test_env_and_cwd(any_host: Host, tmp_path: Path) -> None:
    result = any_host.run(["sh", "-c", 'echo "$SUBRUN_X"; pwd'], env={"SUBRUN_X": "v 1"},
                          cwd=str(tmp_path))
    assert result.stdout.splitlines() == ["v 1", str(tmp_path)]


def test_timeout_stops_the_command(any_host: Host) -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimedOut) as caught:
        any_host.run(["sleep", "30"], timeout_s=1)
    assert time.monotonic() - started < 10
    assert "1 s" in str(caught.value)


def test_stdin_bytes_and_stream(any_host: Host) -> None:
    assert any_host.run(["cat"], stdin=b"hello\n").stdout == "hello\n"
    chunks = (bytes([i % 256]) * 65536 for i in range(32))  # 2 MiB, streamed
    result = any_host.run(["sh", "-c", "wc -c"], stdin=chunks)
    assert result.stdout.strip() == str(32 * 65536)


def test_output_streams_line_by_line(any_host: Host) -> None:
    seen: list[str] = []
    any_host.run(["sh", "-c", "for i in 1 2 3; do echo line$i; done"], on_output=seen.append)
    assert seen == ["line1", "line2", "line3"]


def test_put_get_exists(any_host: Host, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * 100)
    remote = f"{any_host.work_dir}/nested/dir/file.bin"
    any_host.put(src, remote)
    assert any_host.exists(remote)
    assert not any_host.exists(remote + ".missing")
    back = tmp_path / "back" / "file.bin"
    any_host.get(remote, back)
    assert back.read_bytes() == src.read_bytes()


def test_detached_process_is_found_and_reports_exit(any_host: Host) -> None:
    handle = any_host.start_detached(["sh", "-c", "echo started; sleep 1; exit 3"], name="t1")
    again = any_host.find_detached("t1")
    assert again is not None and again.pid == handle.pid
    assert any_host.poll_detached(handle).running
    status = any_host.wait_detached(handle, timeout_s=20)
    assert not status.running and status.exit_status == 3
    assert "started" in any_host.detached_log(handle)
    assert any_host.find_detached("never-started") is None


def test_detached_process_can_be_stopped(any_host: Host) -> None:
    handle = any_host.start_detached(["sleep", "60"], name="t2")
    any_host.stop_detached(handle)
    status = any_host.wait_detached(handle, timeout_s=10)
    assert not status.running
    assert status.exit_status not in (None, 0)


@pytest.mark.parametrize("stranger", ["other command", "same folder, started later"])
def test_a_recorded_pid_now_of_another_process_is_never_signalled(any_host: Host,
                                                                  stranger: str) -> None:
    state = any_host.detached_dir("stale")
    argv = ["sleep", "60"] if stranger == "other command" else ["sh", "-c", "sleep 60; :", state]
    proc = subprocess.Popen(argv, start_new_session=True)  # took the pid of a crashed wrapper
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).cmdline() != argv:  # until its exec is done
            assert time.monotonic() < deadline
            time.sleep(0.01)
        any_host.makedirs(state)
        any_host.run(["sh", "-c", 'echo "$1" > "$0/pid"; echo 1 > "$0/start"', state,
                      str(proc.pid)])
        handle = any_host.find_detached("stale")
        assert handle is not None and handle.pid == proc.pid
        assert any_host.poll_detached(handle).lost  # not running: that process is not ours
        for reach in ("wrapper", "group", "children"):
            assert any_host.stop_detached(handle, signal="KILL", reach=reach) is False
        time.sleep(0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_run_that_ignores_term_is_killed_with_its_whole_group(
        any_host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import native

    monkeypatch.setattr(native, "STOP_GRACE_S", 1.0)
    script = f"trap '' TERM; sleep 60; : {any_host.work_dir}"
    handle = any_host.start_detached(["sh", "-c", script], name="stubborn")
    native._stop(any_host, handle)  # TERM is ignored, so KILL goes to the process group
    assert not any_host.poll_detached(handle).running
    time.sleep(0.3)
    assert not [p for p in psutil.process_iter(["cmdline"]) if script in (p.info["cmdline"] or [])]
