"""FakeHost's own promises beyond the Host contract: scripting, faults, simulated time."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.errors import CommandFailed, ConnectionLost, RunError, TransferFailed
from testkit.fake_host import Call, FakeHost, Reply


def test_the_longest_scripted_prefix_answers_and_every_call_is_recorded() -> None:
    host = FakeHost()
    host.on(["docker"], Reply("any docker\n"))
    host.on(["docker", "info"], lambda call: Reply(f"info {len(call.argv)}\n"))
    assert host.run(["docker", "info", "--format", "x"]).stdout == "info 4\n"
    assert host.run(["docker", "ps"]).stdout == "any docker\n"
    with pytest.raises(CommandFailed, match="no FakeHost handler") as caught:
        host.run(["nvidia-smi"])
    assert caught.value.result.exit_status == 127
    assert host.commands() == [("docker", "info", "--format", "x"), ("docker", "ps"),
                               ("nvidia-smi",)]


def test_a_handler_injects_a_fault() -> None:
    host = FakeHost("h2")

    def drop(call: Call) -> Reply:
        raise ConnectionLost("link dropped", host="h2", argv=call.argv)

    host.on(["docker", "wait"], drop)
    with pytest.raises(ConnectionLost):
        host.run(["docker", "wait", "abc"])


def test_output_is_capped_like_a_real_transport(tmp_path: Path) -> None:
    host = FakeHost(output_cap_bytes=10)
    host.on(["chatty"], Reply("x" * 100 + "the end\n"))
    result = host.run(["chatty"])
    assert result.truncated and result.stdout.endswith("the end\n") and len(result.stdout) == 10
    host.write("/data/big", b"0" * 100)
    with pytest.raises(TransferFailed, match="larger than the 50 bytes"):
        host.get("/data/big", tmp_path / "big", max_bytes=50)
    with pytest.raises(TransferFailed, match="cannot be copied"):
        host.get("/data/none", tmp_path / "none")


def test_detached_processes_run_on_simulated_time() -> None:
    host = FakeHost()
    host.on(["harness"], Reply("done\n", exit_status=0, duration_s=3600))
    handle = host.start_detached(["harness"], name="r1")
    with pytest.raises(RunError, match="already running"):
        host.start_detached(["harness"], name="r1")
    assert host.wait_detached(handle, timeout_s=600).running and host.clock_s == 600
    status = host.wait_detached(handle, timeout_s=7200)
    assert (status.running, status.exit_status, host.clock_s) == (False, 0, 3600)
    assert host.stop_detached(handle) is False  # ended: nothing is signalled
    assert host.read_text(f"{handle.state_dir}/pid") == f"{handle.pid}\n"
