"""A broken link on the lab's real sshd, through a proxy that cuts or silently partitions it:
a silent partition is detected within a bound (not each command's own timeout), a link that
stays down is given up after the host's outage budget, and a run whose link goes silent while
it runs, or while it is collected, is still done exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import target as remote
from bench.execute import execute
from bench.run import RunKind, Scenario
from bench.store import RunStore
from bench.target import RunTarget
from lab import liveness
from lab.config import HostConfig, Inventory
from lab.errors import ConnectionLost, HostUnreachable, LinkDown
from lab.ssh import SshHost
from tests.support.link_proxy import LinkProxy, proxied
from tests.support.targets import provisioned_target
from tests.test_execute import RULES, planned

pytestmark = pytest.mark.lab


@pytest.fixture
def proxy(ssh_config: HostConfig) -> Iterator[LinkProxy]:
    assert ssh_config.address is not None
    link = LinkProxy((ssh_config.address, ssh_config.port))
    yield link
    link.close()


def test_silent_partition_fails_a_waiting_command_within_the_bound(
        ssh_config: HostConfig, proxy: LinkProxy, tmp_path: Path) -> None:
    host = SshHost(proxied(ssh_config, proxy, tmp_path, work_dir=str(tmp_path / "work")))
    host.run(["true"])
    caught: dict[str, BaseException] = {}

    def waiting() -> None:
        try:
            host.run(["sleep", "120"], timeout_s=300)
        except BaseException as e:
            caught["error"] = e

    worker = threading.Thread(target=waiting)
    worker.start()
    time.sleep(0.5)
    proxy.partition()
    started = time.monotonic()
    worker.join(timeout=60)
    detected_s = time.monotonic() - started
    bound_s = liveness.PROBE_INTERVAL_S + liveness.ANSWER_DEADLINE_S + 2
    assert isinstance(caught.get("error"), ConnectionLost), caught
    assert "stopped answering" in str(caught["error"])
    assert detected_s <= bound_s, f"detected after {detected_s:.1f} s"
    proxy.heal()
    assert host.run(["echo", "back"]).stdout == "back\n"  # the next call reconnects
    assert host.outage.elapsed_s == 0


def test_a_host_down_for_its_whole_budget_is_given_up(
        ssh_config: HostConfig, proxy: LinkProxy, tmp_path: Path) -> None:
    host = SshHost(proxied(ssh_config, proxy, tmp_path, outage_budget_s=4))
    host.run(["true"])
    proxy.down()  # the machine is gone: every connection reset (the proxy keeps its port, so
    started = time.monotonic()  # no other listener can ever answer on it)
    with pytest.raises(HostUnreachable) as caught:
        while time.monotonic() - started < 60:  # a cut command, then reconnecting (and the
            try:  # caller retrying after each reconnection window) until the budget is spent
                host.run(["true"])
            except (ConnectionLost, LinkDown):
                continue
            pytest.fail("a command ran on a host whose link is down")
    assert 4 <= time.monotonic() - started < 15
    assert "outage_budget_s: 4" in str(caught.value) and "other hosts carry on" in str(
        caught.value)
    with pytest.raises(HostUnreachable):
        host.ensure_reachable()  # given up for the campaign: later runs fail at once


@pytest.fixture(scope="module")
def h2_image(lab_inventory: Inventory) -> RunTarget:
    return provisioned_target(lab_inventory, "h2", campaign="linkfaults")


def through(proxy: LinkProxy, image: RunTarget, folder: Path) -> RunTarget:
    host = SshHost(proxied(image.config, proxy, folder))
    return RunTarget(host, host.config, image.manifest, image.image, image.image_id,
                     image.campaign)


def partition_for(proxy: LinkProxy, seconds: float) -> None:
    proxy.partition()
    threading.Timer(seconds, proxy.heal).start()


@pytest.fixture
def quick_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shorter probe than the default: the bound itself is tested above, on its own."""
    monkeypatch.setattr(liveness, "PROBE_INTERVAL_S", 1.0)
    monkeypatch.setattr(liveness, "ANSWER_DEADLINE_S", 3.0)


def test_partition_while_a_run_runs_costs_time_not_the_run(
        quick_watchdog: None, proxy: LinkProxy, h2_image: RunTarget, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = through(proxy, h2_image, tmp_path)
    store = RunStore(tmp_path / "store")
    run = planned(target, Scenario.SINGLE_STREAM, RunKind.PERFORMANCE, min_duration=4000)
    real_wait = remote.wait
    waits: list[float] = []

    def wait_then_partition(*args: object, **kwargs: object) -> remote.ProcessEnd:
        waits.append(time.monotonic())
        if len(waits) == 1:  # the link goes silent while the controller waits on the run
            threading.Timer(1.0, partition_for, (proxy, 6.0)).start()
        return real_wait(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(remote, "wait", wait_then_partition)
    record = execute(target, run, store, RULES)
    assert len(waits) >= 2  # the first wait was cut, the reattached one saw the end
    assert record.state == "finished" and record.verdict and record.verdict.passed
    assert [a.attempt for a in store.attempts(run.spec.key)] == [1]  # done exactly once
    assert remote.find(h2_image, record) is None  # and cleaned up


def test_partition_during_collection_collects_once(
        quick_watchdog: None, proxy: LinkProxy, h2_image: RunTarget, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = through(proxy, h2_image, tmp_path)
    store = RunStore(tmp_path / "store")
    run = planned(target, Scenario.SINGLE_STREAM, RunKind.PERFORMANCE, min_duration=1000)
    real_collect = remote.collect
    calls: list[float] = []

    def partitioned_collect(*args: object, **kwargs: object) -> str:
        calls.append(time.monotonic())
        if len(calls) == 1:
            partition_for(proxy, 6.0)  # the link goes silent as collection starts
        return real_collect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(remote, "collect", partitioned_collect)
    record = execute(target, run, store, RULES)
    assert len(calls) >= 2  # the first collection was cut, the reattached one finished
    assert record.state == "finished" and record.verdict and record.verdict.passed
    assert [a.attempt for a in store.attempts(run.spec.key)] == [1]
    assert any(name.endswith("mlperf_log_detail.txt") for name in record.files)
