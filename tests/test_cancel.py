"""Cancelling a campaign stops its runs in flight on the target, keeps what they wrote, records
them `cancelled`, and the campaign started again runs them anew (real lab host h2)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import target as remote
from bench.cancel import cancel_running
from bench.execute import execute, run_files
from bench.manifest import load_manifest
from bench.run import RunKind, Scenario
from bench.store import RunStore
from bench.target import RunTarget
from flows.status import campaign_status
from lab.config import HostConfig, Inventory
from lab.docker import Container
from testkit.fake_host import FakeHost
from tests.support.campaigns import write_campaign
from tests.support.targets import provisioned_target
from tests.test_execute import RULES, longer, planned


@pytest.mark.lab
def test_cancelled_run_is_stopped_kept_and_run_again(lab_inventory: Inventory,
                                                     tmp_path: Path) -> None:
    campaign = f"cancel-me-{uuid.uuid4().hex[:6]}"  # unique: the lab hosts are shared
    target = provisioned_target(lab_inventory, "h2", campaign=campaign)
    run = longer(planned(target, Scenario.OFFLINE, RunKind.PERFORMANCE), 8_000)
    store = RunStore(tmp_path / "store")
    # what a killed flow leaves behind: an attempt marked running, its container going on
    record = store.start_attempt(run.spec)
    handle = remote.start(target, record, run_files(run.spec, RULES))
    assert isinstance(handle.process, Container)
    assert target.engine.status(handle.process).running

    cancelled = cancel_running({"h2": target}, store)
    assert [r.key for r in cancelled] == [run.spec.key]
    assert remote.find(target, record) is None  # stopped and removed, after collection
    kept = store.latest(run.spec.key)
    assert kept is not None and kept.state == "cancelled" and kept.verdict is None
    assert "user.conf" in kept.files and "Cancelled" in (kept.error or "")

    again = execute(target, run, store, RULES)  # the campaign started again
    assert again.attempt == 2 and again.state == "finished", again.error
    assert again.verdict is not None and again.verdict.passed, again.verdict.reason
    target.host.close()


@pytest.mark.lab
def test_on_cancellation_hook_stops_what_a_killed_flow_left_running(
        prefect_api: None, lab_inventory: Inventory, lab_dir: Path, tmp_path: Path) -> None:
    """Prefect calls the flow's on_cancellation hook in the runner once the flow's process is
    gone: the hook alone finds the campaign's run still going on h2, stops it, keeps its files
    and records it cancelled."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.states import Cancelled

    from bench.campaign import load_campaign
    from flows.submission import stop_runs_in_flight, submission

    name = f"hooked-{uuid.uuid4().hex[:6]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"], accuracy=False)
    target = provisioned_target(lab_inventory, "h2", campaign=name)
    run = longer(planned(target, Scenario.OFFLINE, RunKind.PERFORMANCE), 8_000)
    store = RunStore(load_campaign(path).paths.store)
    record = store.start_attempt(run.spec)  # what the killed flow process left behind
    handle = remote.start(target, record, run_files(run.spec, RULES))
    assert isinstance(handle.process, Container)
    assert target.engine.status(handle.process).running

    flow_run = FlowRun(flow_id=uuid.uuid4(), name="killed-flow",
                       parameters={"campaign_file": str(path)})
    stop_runs_in_flight(submission, flow_run, Cancelled())
    assert remote.find(target, record) is None  # stopped and removed, after collection
    kept = store.latest(run.spec.key)
    assert kept is not None and kept.state == "cancelled" and kept.verdict is None
    assert "user.conf" in kept.files and "Cancelled" in (kept.error or "")
    target.host.close()


def test_status_shows_cancelled(tmp_path: Path) -> None:
    """Pure logic: a host's state needs no lab, a FakeHost stands in for h2."""
    config = HostConfig(name="h2", address="127.0.0.2")
    target = RunTarget(FakeHost("h2"), config, load_manifest("digits"), "subrun/digits:t",
                       "sha256:" + "0" * 64, campaign="status")
    run = planned(target, Scenario.OFFLINE, RunKind.PERFORMANCE)
    store = RunStore(tmp_path / "store")
    record = store.start_attempt(run.spec)
    store.update(record.key, record.attempt, state="cancelled")

    [status] = campaign_status(SimpleNamespace(runs=[run]), store)  # type: ignore[arg-type]
    assert status.word == "cancelled"
    assert target.host.commands() == []  # nothing asked of the host
