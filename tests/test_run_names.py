"""One run identity: a run is host/benchmark/scenario/kind, an attempt is its planned run's key
and a number, the same in the store, the status matrix and the tree, across re-runs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.campaign import Campaign
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import AttemptId, Mode, RunId, RunKind, RunSpec, Scenario, Verdict
from bench.store import RunStore
from flows.status import campaign_status
from submission.inputs import StoredRun, latest_attempts


def _spec(**changes: object) -> RunSpec:
    base = RunSpec(host="h2", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
                   kind=RunKind.PERFORMANCE, mode=Mode.SHORT, round="v6.1",
                   settings={"target_qps": 100})
    return base.model_copy(update=changes)


def test_run_id_ignores_settings_and_image_and_reads_as_the_label() -> None:
    planned, rerun = _spec(), _spec(settings={"target_qps": 50}, image_digest="sha256:x")
    assert planned.key != rerun.key  # the inputs differ ...
    assert planned.run == rerun.run == RunId("h2", "digits", Scenario.OFFLINE,
                                             RunKind.PERFORMANCE)  # ... the run does not
    assert planned.label == str(planned.run) == "h2/digits/Offline/performance"


def test_attempt_name_carries_campaign_key_number_and_phase() -> None:
    attempt = AttemptId("abc123", 2)
    assert attempt.name("nightly") == "nightly-abc123-a2"
    assert attempt.name("nightly", "ranging") == "nightly-abc123-ranging-a2"


def test_a_rerun_stays_one_run_in_store_status_and_tree(tmp_path: Path) -> None:
    campaign = Campaign.model_validate({"compliance": False, "accuracy": False, "hosts": [
        {"host": "a", "benchmarks": [{"benchmark": "digits", "scenarios": ["Offline"]}]}]})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    (perf,) = plan.runs
    store = RunStore(tmp_path)
    first = store.start_attempt(perf.spec)
    store.update(first.key, 1, state="finished", verdict=Verdict(passed=False, reason="INVALID"))
    adjusted = perf.spec.model_copy(update={"settings": {**perf.spec.settings,
                                                         "target_qps": 1.0}})
    second = store.start_attempt(adjusted, key=first.key)
    store.update(second.key, 2, state="finished", verdict=Verdict(passed=True),
                 finished_at=datetime.now(UTC))
    again = store.record(first.key, 2)
    assert again.id == AttemptId(perf.spec.key, 2) and again.run == perf.spec.run
    assert again.spec.key != again.key  # the re-run's inputs hash differs; its key does not
    assert [s.word for s in campaign_status(plan, store)] == ["done"]
    stored = [StoredRun(r, store.path(*r.id)) for r in store.attempts(first.key)]
    assert [r.record.id for r in latest_attempts(stored)] == [again.id]
