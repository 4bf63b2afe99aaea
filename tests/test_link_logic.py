"""Pure logic of a flaky link: the outage clock, the watchdog, and which faults are retried."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from prefect.states import Failed

from flows.submission import RETRIES, transient_only
from lab.errors import (
    AccessRefused,
    CommandTimedOut,
    ConnectError,
    ConnectionLost,
    HostUnreachable,
    LinkDown,
    RunError,
    TransferFailed,
    is_link_fault,
    is_transient,
)
from lab.host import CommandResult
from lab.liveness import Outage, Watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_counted_once_however_many_faults_it_has() -> None:
    clock = Clock()
    outage = Outage(60, clock)
    outage.fault()
    clock.now += 20
    outage.fault()  # a second command cut by the same outage: still the same outage
    clock.now += 20
    assert outage.elapsed_s == 40 and outage.remaining_s == 20 and not outage.spent()
    outage.recovered()
    clock.now += 100
    outage.fault()  # a new outage starts from zero
    clock.now += 59
    assert not outage.spent()
    clock.now += 1
    assert outage.spent()
    outage.recovered()
    assert outage.spent()  # given up stays given up


def test_watchdog_declares_a_silent_link_dead_within_interval_plus_deadline() -> None:
    dead = threading.Event()
    silent = threading.Event()
    started = time.monotonic()
    dog = Watchdog(lambda: silent.wait(), lambda: not dead.is_set(), dead.set,
                   interval_s=0.1, deadline_s=0.3).start()
    assert dead.wait(2)
    assert time.monotonic() - started < 1.0
    dog.stop()
    silent.set()


def test_watchdog_leaves_an_answering_link_alone() -> None:
    dead = threading.Event()
    dog = Watchdog(lambda: None, lambda: True, dead.set, interval_s=0.05, deadline_s=0.2).start()
    assert not dead.wait(0.6)
    dog.stop()


def result() -> CommandResult:
    return CommandResult("h2", ("docker", "wait"), -1, "", "", 1.0)


def retried(fault: BaseException | Any, run_count: int = 1) -> bool:
    return transient_only(None, SimpleNamespace(run_count=run_count), Failed(data=fault))


def test_faults_are_classified_by_type() -> None:
    lost = ConnectionLost("cut", host="h2", argv=("true",))
    assert is_transient(lost) and is_transient(ConnectError("down"))
    assert is_transient(CommandTimedOut(result()))
    for final in (AccessRefused("key changed"), HostUnreachable("budget spent"),
                  RunError("failed"), None):
        assert not is_transient(final)


def test_a_link_fault_leaves_the_target_running_whether_or_not_it_is_retried() -> None:
    """The link failing is not the work failing: an attempt stays running after any link
    fault (retried or final), and is judged failed only on what its host did."""
    link = (ConnectError("down"), LinkDown("dropped"), HostUnreachable("budget spent"),
            AccessRefused("key changed"), ConnectionLost("cut", host="h2", argv=("true",)))
    assert all(is_link_fault(f) for f in link)
    for work in (CommandTimedOut(result()), TransferFailed("no such file"), RunError("x"), None):
        assert not is_link_fault(work)
    assert not is_transient(TransferFailed("no such file"))


def test_a_link_down_is_retried_until_the_budget_ends_it_other_faults_twice() -> None:
    assert retried(LinkDown("down 30 s"), run_count=50)  # the outage budget bounds it
    assert not retried(HostUnreachable("budget spent"))
    assert not retried(AccessRefused("key changed"))
    lost = ConnectionLost("cut", host="h2", argv=("true",))
    assert retried(lost, run_count=RETRIES) and not retried(lost, run_count=RETRIES + 1)
    assert not retried("a verdict is data, not a fault")


def test_a_transport_that_looks_active_but_opens_nothing_does_not_end_the_outage() -> None:
    """A reset the transport has not noticed yet leaves it "active": only a command that starts
    ends an outage, so a link whose every command is cut is still given up on its budget."""
    from lab.config import HostConfig
    from lab.ssh import SshHost

    class Stale:
        def is_active(self) -> bool:
            return True

        def open_session(self, timeout: float) -> Any:
            raise EOFError("reset")

    host = SshHost(HostConfig.model_validate(
        {"name": "h", "address": "127.0.0.9", "outage_budget_s": 1}))
    clock = Clock()
    host.outage = Outage(1, clock)
    host._client = SimpleNamespace(get_transport=Stale, close=lambda: None)  # type: ignore[assignment]
    for _ in range(3):
        try:
            host.run(["true"])
        except ConnectionLost:
            clock.now += 0.4
    try:
        host.run(["true"])
    except HostUnreachable as e:
        assert "outage_budget_s: 1" in str(e)
    else:
        raise AssertionError("a host whose every command is cut was not given up")


def test_a_probe_cut_by_the_link_starts_over_until_the_outage_budget_is_spent(
        monkeypatch: Any) -> None:
    from lab import probe as probing
    from lab.config import HostConfig
    from testkit.fake_host import Call, FakeHost, Reply

    cuts = {"left": 2}

    def docker_version(call: Call) -> Reply:
        if cuts["left"]:
            cuts["left"] -= 1
            raise ConnectionLost("cut", host="h", argv=call.argv)
        return Reply(stdout="26.1.5\n")

    def flaky() -> FakeHost:
        host = FakeHost("h")
        host.on(["docker", "version"], docker_version)
        host.on(["date"], Reply(stdout=f"{time.time():.6f}\n"))
        return host

    monkeypatch.setattr(probing, "open_host", lambda config: flaky())
    config = HostConfig(name="h", address="192.0.2.1", outage_budget_s=30.0)
    report = probing.probe(config, pause_s=0.01)
    assert report.reachable and report.docker == "26.1.5" and cuts["left"] == 0, report
    cuts["left"] = 10**6  # cut for longer than the budget: the host is reported down
    short = config.model_copy(update={"outage_budget_s": 0.2})
    report = probing.probe(short, pause_s=0.05)
    assert not report.reachable and "cut" in report.problems[0]


def test_hosts_are_probed_side_by_side_and_reported_in_their_order(monkeypatch: Any) -> None:
    """Each host's probe waits at a barrier for the other's: probed one after the other, the
    first would wait alone until the barrier breaks."""
    import threading

    from lab import probe as probing
    from lab.config import HostConfig
    from testkit.fake_host import Call, FakeHost, Reply

    both = threading.Barrier(2, timeout=30)

    def docker_version(call: Call) -> Reply:
        both.wait()
        return Reply(stdout="26.1.5\n")

    def host(config: HostConfig) -> FakeHost:
        fake = FakeHost(config.name)
        fake.on(["docker", "version"], docker_version)
        fake.on(["date"], Reply(stdout=f"{time.time():.6f}\n"))
        return fake

    monkeypatch.setattr(probing, "open_host", host)
    configs = [HostConfig(name=n, address="192.0.2.1") for n in ("b", "a")]
    reports = probing.probe_all(configs)
    assert [r.name for r in reports] == ["b", "a"]
    assert all(r.reachable and r.docker == "26.1.5" for r in reports), reports
    assert not both.broken
