"""Resume on the real lab: `subrun run` is killed (SIGKILL to its whole process group, ephemeral
Prefect server included) while a run's container is going on a target; started again, it
repeats no finished run, reattaches the run whose container ended while no controller watched,
collects and judges it once, and finishes the campaign; `subrun status` names the container
left on its host before, and nothing after.
The kill may also catch another host between opening an attempt and starting its container;
that attempt is recorded lost (it never ran) and its run started once, as the next attempt."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from bench import target as remote
from bench.campaign import Campaign, load_campaign
from bench.manifest import load_manifest
from bench.run import RunRecord, RunState
from bench.store import RunStore
from bench.target import RunTarget
from lab.config import Inventory
from lab.errors import ImageError
from lab.transport import open_host
from tests.support.campaigns import write_campaign
from tests.support.prefect_home import fresh_home
from tests.support.targets import OFFLINE_ABOVE_REACH_QPS

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent
SUBRUN = ROOT / ".venv" / "bin" / "subrun"
HOSTS = ["h2", "h3"]
# A few seconds per run: Offline's target QPS lies above what the demo SUT reaches, so LoadGen's
# sample count outlasts min_duration (VALID); SingleStream runs its min_duration.
SETTINGS: dict[str, dict[str, float]] = {
    "Offline": {"min_duration": 1500, "target_qps": OFFLINE_ABOVE_REACH_QPS},
    "SingleStream": {"min_duration": 3000}}


@pytest.fixture
def targets(lab_inventory: Inventory) -> Iterator[dict[str, RunTarget]]:
    """Connections to the campaign's hosts, to look for run containers by label."""
    manifest = load_manifest("digits")
    found = {h: RunTarget(open_host(lab_inventory.host(h)), lab_inventory.host(h), manifest,
                          image="", image_id="") for h in HOSTS}
    yield found
    for target in found.values():
        target.host.close()


def subrun_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PREFECT_HOME": str(fresh_home(tmp_path / "prefect")),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "200"}


def in_flight(store: RunStore, targets: dict[str, RunTarget]) -> RunRecord | None:
    """A running attempt whose container is up on its host, once another run has finished."""
    records = store.runs()  # the latest attempt of each run
    if not any(r.state == RunState.FINISHED for r in records):
        return None
    for record in (r for r in records if r.state == RunState.RUNNING):
        target = targets[record.spec.host]  # the container, looked up by its run label
        container = target.engine.find(record.id.name(target.campaign))
        try:
            if container is not None and target.engine.status(container).running:
                return record
        except ImageError:  # removed between the lookup and the inspection: it ended
            continue
    return None


def kill_when_in_flight(proc: subprocess.Popen[bytes], store: RunStore,
                        targets: dict[str, RunTarget], log: Path) -> RunRecord:
    """Wait for a run in flight, then SIGKILL `subrun run` and everything it started."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"`subrun run` ended ({proc.returncode}) before a run was caught in "
                        f"flight:\n{log.read_text()[-3000:]}")
        record = in_flight(store, targets)
        if record is not None:
            family = psutil.Process(proc.pid).children(recursive=True)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            _, alive = psutil.wait_procs(family, timeout=10)
            assert not alive, f"processes left after the kill: {alive}"
            return record
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"no run was in flight within 240 s:\n{log.read_text()[-3000:]}")


def status_of(campaign: Path, env: dict[str, str]) -> tuple[dict[str, int], list[str]]:
    """`subrun status` as counts per state (done, failed, running, pending), and its lines
    on what the campaign left on each host."""
    shown = subprocess.run([str(SUBRUN), "status", str(campaign)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    counts = {state: int(n) for n, state in re.findall(r"(\d+) (done|failed|running|pending)",
                                                       shown.stdout)}
    return counts, [line for line in shown.stdout.splitlines() if line.startswith("host ")]


def test_killed_campaign_resumes_without_repeating_a_run(
        lab_dir: Path, tmp_path: Path, targets: dict[str, RunTarget]) -> None:
    name = f"resume-{uuid.uuid4().hex[:8]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", HOSTS, accuracy=False,
                          scenarios=("Offline", "SingleStream"), settings=SETTINGS)
    campaign: Campaign = load_campaign(path)
    store, env, log = RunStore(campaign.paths.store), subrun_env(tmp_path), tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen([str(SUBRUN), "run", str(path)], env=env, cwd=ROOT,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        named = {h: replace(t, campaign=name) for h, t in targets.items()}  # run ids carry it
        caught = kill_when_in_flight(first, store, named, log)
    done_before = {r.key: r for r in store.runs() if r.state == "finished"}
    counts, hosts = status_of(path, env)
    assert counts["running"] >= 1
    left = f"host {caught.spec.host}: left: 1 container (subrun-{caught.id.name(name)} "
    assert any(line.startswith(left) for line in hosts), hosts
    target = named[caught.spec.host]  # its container ends while no controller watches
    running = remote.find(target, caught)
    assert running is not None
    assert not remote.wait(target, running, 120).running

    again = subprocess.run([str(SUBRUN), "run", str(path)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]

    keys = store.keys()
    assert len(keys) == len(HOSTS) * len(SETTINGS)
    for key in keys:
        tries = store.attempts(key)
        (done,) = [a for a in tries if a.state == "finished"]  # every run finished once
        assert done.verdict and done.verdict.passed, done.error
        # An attempt the kill caught opened but before its container started is recorded lost
        # (nothing ran, nothing was collected) and the run starts as the next attempt.
        assert all(a.state == "lost" and not a.files for a in tries if a != done), tries
    assert store.attempts(caught.key) == [store.record(caught.key, caught.attempt)]
    collected = store.record(caught.key, caught.attempt)  # reattached, collected, judged
    assert collected.started_at == caught.started_at and collected.files
    assert remote.find(targets[caught.spec.host], caught) is None  # and cleaned up
    for key, before in done_before.items():
        assert store.latest(key) == before  # finished runs untouched
    counts, hosts = status_of(path, env)
    assert counts == {"done": 4, "failed": 0, "running": 0, "pending": 0}
    assert len(hosts) == len(HOSTS) and all(  # another test's campaign may hold a host now
        line.startswith(f"host {h}: nothing of the campaign left")
        for h, line in zip(HOSTS, hosts, strict=True)), hosts
