"""Telemetry of real runs on lab host h2: the trace is collected with the attempt, and a host
made busy by other processes during the run gets the `contended` flag.

A quiet run is not asserted unflagged: the lab is one shared 2-core machine on which other
work (other test sessions, builds) often keeps both cores busy, so "quiet" cannot be arranged
here; the flag would be right to say so. Its summary is printed for the record.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench import sampler, telemetry
from bench import target as remote
from bench.execute import ExecuteOptions, execute, run_files
from bench.run import RunKind, Scenario
from bench.store import RunStore
from bench.target import RunTarget
from flows import steps
from flows.context import CampaignContext
from lab.config import Inventory
from lab.host import Host
from lab.provision import ProvisionResult
from tests import test_native
from tests.support.targets import provisioned_target
from tests.test_execute import RULES, longer, planned

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def h2_target(lab_inventory: Inventory) -> RunTarget:
    return provisioned_target(lab_inventory, "h2", campaign=f"tele-{uuid.uuid4().hex[:6]}")


@contextmanager
def busy_loops(host: Host, count: int) -> Iterator[None]:
    """count shell busy loops on host, stopped (by their recorded pid) on leaving."""
    tag = uuid.uuid4().hex[:8]
    handles = [host.start_detached(["sh", "-c", "while :; do :; done"], name=f"busy-{tag}-{i}")
               for i in range(count)]
    try:
        yield
    finally:
        for handle in handles:
            host.stop_detached(handle, signal="KILL", reach="group")
            host.run(["rm", "-rf", handle.state_dir], timeout_s=30)


def test_a_run_has_its_trace_with_the_sampled_fields(h2_target: RunTarget,
                                                     tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    run = longer(planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE), 6000)
    record = execute(h2_target, run, store, RULES)
    assert record.state == "finished", record.error
    assert sampler.TRACE in record.files
    lines = (store.path(record.key, record.attempt) / sampler.TRACE).read_text().splitlines()
    head, first = json.loads(lines[0]), json.loads(lines[1])
    assert head["run_unit"] in ("us", "ns")  # the container's cgroup was found
    assert {"up", "cpu", "cores", "khz", "temp_mc", "load", "mem_kb", "run", "gpu"} <= set(first)
    assert isinstance(first["run"], int)
    assert "self_ticks" in json.loads(lines[-1])  # the sampler ended cleanly, before collection
    summary = record.telemetry
    assert summary is not None and summary.samples >= 5 and summary.skipped_lines == 0
    assert summary.run_cpu_mean_pct is not None and summary.run_cpu_mean_pct > 0
    assert summary.cpu_mean_pct is not None and summary.mem_min_available_mb
    print("quiet run:", summary.model_dump_json())
    rid = f"{h2_target.campaign}-{record.key}-a{record.attempt}"
    assert not h2_target.host.exists(h2_target.host.detached_dir(sampler.process_name(rid)))


# its busy loops are its measure of "other processes": with other tests' load on top, its run
# was starved to about 1 % of a core and read as idle
@pytest.mark.serial
def test_a_host_kept_busy_by_other_processes_flags_the_run_contended(
        h2_target: RunTarget, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    # unpinned, so the busy loops share every core with the run (a pinned h2 is
    # tests/test_cores_lab.py's)
    docker = h2_target.config.docker.model_copy(update={"cpuset": None})
    h2_target = dataclasses.replace(
        h2_target, config=h2_target.config.model_copy(update={"docker": docker}))
    # Server: the run lasts its 6 s whatever the SUT's speed (an Offline run of a fast SUT ends
    # when its samples do), at a rate that keeps the SUT working (>= 5 % CPU: telemetry judges
    # contention only while the run works)
    run = planned(h2_target, Scenario.SERVER, RunKind.PERFORMANCE, min_duration=6000,
                  target_qps=4000, min_query_count=100)
    cores = int(h2_target.host.run(["getconf", "_NPROCESSORS_ONLN"]).stdout)
    with busy_loops(h2_target.host, cores):
        record = execute(h2_target, run, store, RULES, options=ExecuteOptions(max_reruns=0))
    assert record.state == "finished", record.error
    summary = record.telemetry
    assert summary is not None, record.files
    print("busy run:", summary.model_dump_json())
    assert summary.contended, summary
    assert summary.other_mean_pct is not None and summary.other_mean_pct >= 20
    assert any("contended" in r for r in summary.reasons)
    # a warning, not a failure: no check of the verdict comes from telemetry
    assert record.verdict is not None
    assert not any("telemetry" in c.name or "contended" in c.detail for c in record.verdict.checks)


def test_a_reattached_run_keeps_its_sampler(h2_target: RunTarget, tmp_path: Path) -> None:
    """A controller that crashed left the run and its sampler going: the controller started
    again reattaches to both, and the trace is one sampler's, from start to end."""
    store = RunStore(tmp_path / "store")
    run = longer(planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE), 5000)
    record = store.start_attempt(run.spec)
    handle = remote.start(h2_target, record, run_files(run.spec, RULES))
    telemetry.begin(h2_target, handle)  # what the crashed controller had started
    time.sleep(2)
    final = execute(h2_target, run, store, RULES)
    assert final.state == "finished" and final.attempt == record.attempt, final.error
    lines = (store.path(final.key, final.attempt) / sampler.TRACE).read_text().splitlines()
    assert sum('"v":1' in line for line in lines) == 1  # never a second sampler
    assert final.telemetry is not None and final.telemetry.samples >= 5


edge = test_native.edge  # the engine-false copy of h2, its digits environment provisioned


def test_a_native_run_is_sampled_by_its_session(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, images = edge
    record = steps.run(ctx, test_native.planned(ctx, RunKind.PERFORMANCE), images)
    assert record.state == "finished", record.error
    lines = (ctx.store.path(record.key, record.attempt) / sampler.TRACE).read_text().splitlines()
    assert json.loads(lines[0])["run_unit"] == "ticks"  # the run's session, summed
    summary = record.telemetry
    assert summary is not None and summary.samples >= 2
    assert summary.run_cpu_mean_pct is not None and summary.run_cpu_mean_pct > 0
    print("native run:", summary.model_dump_json())
