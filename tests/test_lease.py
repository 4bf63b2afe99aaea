"""A host's lease lives on the host: a kernel lock held by a process there, which says who holds
it, lets go when released, and outlives a killed controller only for the bound or while the
campaign's work still runs. On the real part: `flock`, `setsid` and processes on this machine."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.lease import CHECK_S, Busy, Lease, LeaseHolder, leased, try_take
from lab.local import LocalHost


@pytest.fixture
def host(tmp_path: Path) -> Iterator[LocalHost]:
    target = LocalHost("t1", str(tmp_path / "work"))
    yield target
    for pid_file in (tmp_path / "work").glob("leases/*/pid"):  # no holder outlives its test
        subprocess.run(["kill", pid_file.read_text().strip()], check=False)


def holder_process(host: LocalHost, campaign: str, bound_s: int) -> subprocess.Popen[str]:
    """A controller in a process of its own that takes the lease, says so, and keeps it."""
    code = textwrap.dedent(f"""
        import sys, time
        from lab.lease import LeaseHolder, leased
        from lab.local import LocalHost
        host = LocalHost("t1", {host.work_dir!r})
        with leased(host, "host", LeaseHolder.here({campaign!r}, "r1"), print, bound_s={bound_s}):
            print("HELD", flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "HELD"
    return proc


def taken_within(host: LocalHost, me: LeaseHolder, limit_s: float) -> tuple[Lease, float]:
    """Try until the lease is mine; how long that took."""
    start = time.monotonic()
    while True:
        taken = try_take(host, "host", me)
        if isinstance(taken, Lease):
            return taken, time.monotonic() - start
        assert time.monotonic() - start < limit_s, f"still held after {limit_s} s: {taken}"
        time.sleep(0.2)


def test_a_second_taker_is_told_who_holds_the_host_and_takes_it_once_released(
        host: LocalHost) -> None:
    first = try_take(host, "host", LeaseHolder.here("nightly", "h/digits/Offline/performance"))
    assert isinstance(first, Lease)
    second = try_take(host, "host", LeaseHolder.here("adhoc", "r"))
    assert isinstance(second, Busy) and second.holder is not None
    assert (second.holder.campaign, second.holder.run) == ("nightly",
                                                          "h/digits/Offline/performance")
    assert "campaign 'nightly', run h/digits/Offline/performance" in second.holder.describe()
    assert first.renew(1)
    first.release()
    lease = try_take(host, "host", LeaseHolder.here("adhoc", "r"))  # let go before release returns
    assert isinstance(lease, Lease), lease
    lease.release()


@pytest.mark.slow  # seconds of real waiting
def test_leases_taken_in_a_race_never_overlap(host: LocalHost) -> None:
    intervals: list[tuple[float, float]] = []
    waits: list[str] = []

    def one(n: int) -> None:
        with leased(host, "host", LeaseHolder.here(f"c{n}", "r"), waits.append):
            start = time.monotonic()
            time.sleep(0.5)
            intervals.append((start, time.monotonic()))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(intervals) == 3
    ordered = sorted(intervals)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)), ordered
    assert any("is held by campaign 'c" in w for w in waits), waits


@pytest.mark.slow  # seconds of real waiting
def test_a_killed_controllers_lease_is_taken_over_within_the_bound(host: LocalHost) -> None:
    bound_s = 3
    proc = holder_process(host, "killed", bound_s)
    assert isinstance(try_take(host, "host", LeaseHolder.here("other", "r")), Busy)
    proc.kill()
    proc.wait()
    killed = time.monotonic()
    lease, _ = taken_within(host, LeaseHolder.here("other", "r"), bound_s + CHECK_S + 10)
    waited = time.monotonic() - killed
    assert bound_s - 1 <= waited <= bound_s + CHECK_S + 3, waited
    lease.release()


@pytest.mark.slow  # seconds of real waiting
def test_a_lapsed_lease_is_kept_while_its_campaigns_work_runs(host: LocalHost) -> None:
    lease = try_take(host, "host", LeaseHolder.here("camp", "r"), bound_s=1)
    assert isinstance(lease, Lease)
    work = host.start_detached(["sleep", str(2 * CHECK_S + 4)], name="subrun-camp-key-a1")
    time.sleep(1 + CHECK_S + 1)  # no beat for longer than the bound: the run holds it
    assert isinstance(try_take(host, "host", LeaseHolder.here("other", "r")), Busy)
    host.wait_detached(work, timeout_s=10)
    _, waited = taken_within(host, LeaseHolder.here("other", "r"), CHECK_S + 5)
    assert waited <= CHECK_S + 3


def test_the_same_campaign_started_again_takes_over_its_dead_controllers_lease_at_once(
        host: LocalHost) -> None:
    proc = holder_process(host, "mine", bound_s=600)
    proc.kill()
    proc.wait()
    waits: list[str] = []
    start = time.monotonic()
    with leased(host, "host", LeaseHolder.here("mine", "r1"), waits.append):
        assert time.monotonic() - start < 5
    assert waits == []


def test_leftovers_name_what_a_campaign_left_on_a_host_and_who_holds_it(
        host: LocalHost) -> None:
    from bench.leftovers import leftovers

    assert leftovers(host, "camp").line() == "t1: nothing of the campaign left"
    work = Path(host.work_dir)
    (work / "runs" / "camp-h-digits-offline-a1").mkdir(parents=True)
    (work / "runs" / "other-h-digits-offline-a1").mkdir(parents=True)
    sleeper = host.start_detached(["sleep", "30"], name="subrun-camp-h-digits-offline-a2")
    lease = try_take(host, "host", LeaseHolder.here("camp", "h/digits/Offline/performance"))
    assert isinstance(lease, Lease)
    try:
        found = leftovers(host, "camp")
    finally:
        host.stop_detached(sleeper, signal="KILL", reach="group")
        lease.release()
    assert (found.processes, found.folders) == (("subrun-camp-h-digits-offline-a2 (running)",),
                                                ("camp-h-digits-offline-a1",))
    assert not found.empty and found.lease is not None
    assert found.line().startswith(
        "t1: left: 1 process (subrun-camp-h-digits-offline-a2 (running)); 1 run folder "
        "(camp-h-digits-offline-a1); the host is held by campaign 'camp', run "
        "h/digits/Offline/performance"), found.line()
