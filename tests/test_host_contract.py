"""One contract, three transports: LocalHost and real SSH (lab), and the in-memory FakeHost.

The fake runs the tests that do not need a real kernel, with the shell snippets below scripted
as the answers a real shell gives; the tests of process groups and reused pids are lab-only."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lab.config import Inventory
from lab.errors import CommandFailed, CommandTimedOut, ConnectError, TransferFailed, is_transient
from lab.host import Host
from lab.local import LocalHost
from lab.transport import open_host
from testkit.fake_host import Call, FakeHost, Reply

# what a real shell answers to the snippets of this contract
SCRIPTED = {
    "echo out; echo err >&2; exit 0": Reply("out\n", "err\n"),
    "echo why-it-failed; exit 7": Reply("why-it-failed\n", exit_status=7),
    "exit 3": Reply(exit_status=3),
    "echo started; sleep 1; exit 3": Reply("started\n", exit_status=3, duration_s=1),
}


def _env_and_pwd(call: Call) -> Reply:
    return Reply(f"{call.env.get('SUBRUN_X', '')}\n{call.cwd}\n")


def fake_host(work_dir: str) -> FakeHost:
    host = FakeHost("fake", work_dir)
    for script, reply in SCRIPTED.items():
        host.on(["sh", "-c", script], reply)
    host.on(["sh", "-c", 'echo "$SUBRUN_X"; pwd'], _env_and_pwd)
    return host


def lab_host(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Host:
    inventory: Inventory = request.getfixturevalue("lab_inventory")
    config = inventory.host(name).model_copy(update={"work_dir": str(tmp_path / "work")})
    return open_host(config)


@pytest.fixture(params=["fake", pytest.param("local", marks=pytest.mark.lab),
                        pytest.param("h2", marks=pytest.mark.lab)])
def any_host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    """The same contract over the fake, the local transport and real SSH."""
    host = (fake_host(str(tmp_path / "work")) if request.param == "fake"
            else lab_host(request, request.param, tmp_path))
    yield host
    host.close()


@pytest.fixture(params=[pytest.param("local", marks=pytest.mark.lab),
                        pytest.param("h2", marks=pytest.mark.lab)])
def real_host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    """Local and SSH only: what needs a real kernel (pids, process groups)."""
    host = lab_host(request, request.param, tmp_path)
    yield host
    host.close()


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
    unknown = any_host.run(["subrun-no-such-program"], check=False)
    assert unknown.exit_status == 127  # what callers read as "not installed there"


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
    result = any_host.run(["wc", "-c"], stdin=chunks)
    assert result.stdout.strip() == str(32 * 65536)


def test_output_streams_line_by_line(any_host: Host) -> None:
    seen: list[str] = []
    any_host.run(["printf", "%s\\n", "line1", "line2", "line3"], on_output=seen.append)
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
    assert (any_host.free_bytes(any_host.work_dir) or 0) > 0


def test_copying_a_missing_file_is_final_and_names_it(any_host: Host, tmp_path: Path) -> None:
    missing = tmp_path / "not-there.bin"
    with pytest.raises(TransferFailed, match=r"not-there\.bin") as caught:
        any_host.put(missing, f"{any_host.work_dir}/copy.bin")
    assert not is_transient(caught.value)  # no link dropped: retrying cannot help


def test_a_failed_local_copy_is_final_never_a_dropped_link(tmp_path: Path) -> None:
    """A local copy has no network: a missing source or an unwritable destination is a
    TransferFailed naming the path, never a ConnectError that retries as if the link dropped."""
    host = LocalHost("local", str(tmp_path))
    source = tmp_path / "results.txt"
    source.write_text("kept\n")
    (tmp_path / "a-file").write_text("")  # a file where the destination needs a folder
    for copy, path in ((lambda: host.put(tmp_path / "gone.txt", str(tmp_path / "x")), "gone"),
                       (lambda: host.get(str(source), tmp_path / "a-file" / "copy.txt"),
                        "a-file")):
        with pytest.raises(TransferFailed, match=path) as caught:
            copy()
        assert not isinstance(caught.value, ConnectError) and not is_transient(caught.value)
        assert "copying again will not help" in str(caught.value)


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


def test_a_detached_process_is_ended_and_its_folder_removed_in_one_call(any_host: Host
                                                                        ) -> None:
    handle = any_host.start_detached(["sleep", "60"], name="t3")
    assert any_host.end_detached("t3", wait_s=5)
    status = any_host.poll_detached(handle)
    assert not status.running and status.exit_status not in (None, 0)
    assert any_host.end_detached("t3", wait_s=5)  # ended already: nothing left to signal
    assert any_host.end_detached("t3", wait_s=0, remove=True)
    assert not any_host.exists(any_host.detached_dir("t3"))
    assert any_host.find_detached("t3") is None
    assert not any_host.end_detached("never-started", wait_s=1)


@pytest.mark.parametrize("stranger", ["other command", "same folder, started later"])
def test_a_recorded_pid_now_of_another_process_is_never_signalled(real_host: Host,
                                                                  stranger: str) -> None:
    state = real_host.detached_dir("stale")
    argv = ["sleep", "60"] if stranger == "other command" else ["sh", "-c", "sleep 60; :", state]
    proc = subprocess.Popen(argv, start_new_session=True)  # took the pid of a crashed wrapper
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).cmdline() != argv:  # until its exec is done
            assert time.monotonic() < deadline
            time.sleep(0.01)
        real_host.makedirs(state)
        real_host.run(["sh", "-c", 'echo "$1" > "$0/pid"; echo 1 > "$0/start"', state,
                      str(proc.pid)])
        handle = real_host.find_detached("stale")
        assert handle is not None and handle.pid == proc.pid
        assert real_host.poll_detached(handle).lost  # not running: that process is not ours
        for reach in ("wrapper", "group", "children"):
            assert real_host.stop_detached(handle, signal="KILL", reach=reach) is False
        assert real_host.end_detached("stale", wait_s=0)  # recorded, but not signalled
        time.sleep(0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_run_that_ignores_term_is_killed_with_its_whole_group(
        real_host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import native

    monkeypatch.setattr(native, "STOP_GRACE_S", 1.0)
    script = f"trap '' TERM; sleep 60; : {real_host.work_dir}"
    handle = real_host.start_detached(["sh", "-c", script], name="stubborn")
    native._stop(real_host, handle)  # TERM is ignored, so KILL goes to the process group
    assert not real_host.poll_detached(handle).running
    time.sleep(0.3)
    assert not [p for p in psutil.process_iter(["cmdline"]) if script in (p.info["cmdline"] or [])]


def test_ending_a_detached_process_that_ignores_term_kills_its_whole_group(
        real_host: Host) -> None:
    script = f"trap '' TERM; sleep 60; : {real_host.work_dir}"
    handle = real_host.start_detached(["sh", "-c", script], name="stubborn-end")
    assert real_host.end_detached("stubborn-end", wait_s=0.5)
    assert not real_host.poll_detached(handle).running
    time.sleep(0.3)
    assert not [p for p in psutil.process_iter(["cmdline"]) if script in (p.info["cmdline"] or [])]
