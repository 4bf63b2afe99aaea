"""Planning: run order per host, compliance after its references, estimates per mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.campaign import Campaign, HostPlan, load_campaign
from bench.manifest import load_manifest
from bench.measured import measured_in
from bench.plan import RUN_OVERHEAD_S, make_plan
from bench.rules import load_rules
from bench.run import Mode, RunKind, Scenario, Verdict
from bench.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def demo_plan(**update: object):  # type: ignore[no-untyped-def]
    campaign = load_campaign(ROOT / "campaigns" / "demo.yaml").model_copy(update=update)
    return make_plan(campaign, {"digits": load_manifest("digits")}, load_rules(campaign.round))


def test_demo_plan_covers_every_scenario_and_kind_in_order() -> None:
    plan = demo_plan()
    kinds = [r.spec.kind for r in plan.for_host("local") if r.spec.scenario is Scenario.OFFLINE]
    assert kinds == [RunKind.PERFORMANCE, RunKind.ACCURACY, RunKind.TEST01, RunKind.TEST04,
                     RunKind.POWER]
    assert {r.spec.scenario for r in plan.runs} == set(load_manifest("digits").scenarios)
    test01 = next(r for r in plan.runs if r.spec.kind is RunKind.TEST01)
    assert test01.after == ("local/digits/SingleStream/performance",
                            "local/digits/SingleStream/accuracy")
    assert len({r.spec.key for r in plan.runs}) == len(plan.runs)


def test_short_mode_lowers_durations_submission_mode_keeps_official_ones() -> None:
    short = demo_plan()
    minimum = {r.spec.kind: r.spec.settings.get(f"*.{r.spec.scenario.loadgen}.min_duration")
               for r in short.runs}
    assert minimum.pop(RunKind.POWER) == 5000  # a power window needs several samples
    assert minimum.pop(RunKind.ACCURACY) == 1000
    assert set(minimum.values()) == {3000}  # runs compared within 10 % by the tests
    own = demo_plan(hosts=[HostPlan.model_validate({"host": "local", "benchmarks": [{
        "benchmark": "digits", "scenarios": ["Offline"],
        "settings": {"Offline": {"min_duration": 1500}}}]})])
    assert {r.spec.kind: r.spec.settings["*.Offline.min_duration"] for r in own.runs} == {
        RunKind.PERFORMANCE: 1500, RunKind.ACCURACY: 1500, RunKind.TEST01: 1500,
        RunKind.TEST04: 1500, RunKind.POWER: 5000}
    official = demo_plan(mode=Mode.SUBMISSION, power=False)
    assert all(not any("min_duration" in k for k in r.spec.settings) for r in official.runs)
    perf = [r for r in official.runs if r.spec.kind is RunKind.PERFORMANCE]
    assert all(r.estimate_s >= 600 for r in perf)
    assert official.estimate_s > 10 * short.estimate_s


def test_hosts_run_in_parallel_so_the_busiest_host_sets_the_estimate() -> None:
    campaign = Campaign.model_validate({
        "hosts": [{"host": "a", "benchmarks": [{"benchmark": "digits",
                                                "scenarios": ["Offline"]}]},
                  {"host": "b", "benchmarks": [{"benchmark": "digits"}]}]})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    assert plan.estimate_s == plan.host_estimate_s("b") > plan.host_estimate_s("a")


def test_binding_images_changes_keys() -> None:
    plan = demo_plan()
    bound = plan.with_images({("local", "digits"): "sha256:abc"}, "6.0.17")
    assert all(a.spec.key != b.spec.key for a, b in zip(plan.runs, bound.runs, strict=True))


def test_campaign_settings_override_manifest_defaults() -> None:
    campaign = Campaign.model_validate({"hosts": [{"host": "a", "benchmarks": [
        {"benchmark": "digits", "scenarios": ["Offline"],
         "settings": {"Offline": {"target_qps": 123}}}]}]})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    assert plan.runs[0].spec.settings["*.Offline.target_qps"] == 123


def test_a_campaigns_own_short_min_duration_sets_settings_and_estimate() -> None:
    campaign = Campaign.model_validate({"hosts": [{"host": "a", "benchmarks": [{
        "benchmark": "digits", "scenarios": ["Offline"],
        "settings": {"Offline": {"min_duration": 20000, "target_qps": 8000}}}]}],
        "accuracy": False, "compliance": False})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    (run,) = plan.runs
    assert run.spec.settings["*.Offline.min_duration"] == 20000
    assert run.estimate_s >= 20


def _store_with_offline_run(root: Path, samples_per_s: float) -> RunStore:
    """A store holding one finished Offline performance run of host a that measured a rate."""
    store = RunStore(root)
    plan = demo_plan(hosts=[HostPlan.model_validate({"host": "a", "benchmarks": [
        {"benchmark": "digits", "scenarios": ["Offline"]}]})])
    spec = plan.runs[0].spec.model_copy(update={"image_digest": "sha256:0123456789abcdef"})
    record = store.start_attempt(spec)
    store.update(record.key, record.attempt, state="finished", verdict=Verdict(
        passed=True, metrics={"samples_per_second": samples_per_s}))
    return store


def test_an_offline_target_above_the_measured_rate_lengthens_the_estimate(tmp_path: Path) -> None:
    """LoadGen issues 1.1 x target_qps x min_duration samples whatever the host reaches."""
    store = _store_with_offline_run(tmp_path / "store", samples_per_s=6000)
    campaign = Campaign.model_validate({"mode": "submission", "power": False,
                                        "accuracy": False, "compliance": False,
                                        "hosts": [{"host": "a", "benchmarks": [
                                            {"benchmark": "digits", "scenarios": ["Offline"]}]}]})
    manifests = {"digits": load_manifest("digits")}
    rules = load_rules(campaign.round)
    (unmeasured,) = make_plan(campaign, manifests, rules).runs
    (run,) = make_plan(campaign, manifests, rules, measured_in(store)).runs
    target = manifests["digits"].user_conf_defaults(Scenario.OFFLINE)["target_qps"]
    samples = 1.1 * target * rules.min_duration_ms / 1000
    assert unmeasured.estimate_s == pytest.approx(samples / target + RUN_OVERHEAD_S)
    assert run.estimate_s == pytest.approx(samples / 6000 + RUN_OVERHEAD_S)
    assert "above the 6000 samples/s measured by a/digits/Offline/performance" in run.assumption
    assert "image 0123456789ab" in run.assumption


def test_a_measured_rate_above_the_target_shortens_accuracy_and_keeps_latency_runs(
        tmp_path: Path) -> None:
    store = _store_with_offline_run(tmp_path / "store", samples_per_s=50000)
    campaign = Campaign.model_validate({"hosts": [{"host": "a", "benchmarks": [
        {"benchmark": "digits", "scenarios": ["Offline", "SingleStream"]}]}],
        "compliance": False, "power": False})
    manifests = {"digits": load_manifest("digits")}
    plan = make_plan(campaign, manifests, load_rules(campaign.round), measured_in(store))
    by_label = {r.label: r for r in plan.runs}
    accuracy = by_label["a/digits/Offline/accuracy"]
    assert accuracy.estimate_s == pytest.approx(50000 / 50000 + RUN_OVERHEAD_S)
    assert accuracy.assumption.startswith("measured by a/digits/Offline/performance")
    single = by_label["a/digits/SingleStream/performance"]
    assert single.assumption == ""  # nothing measured for SingleStream: the target decides


def test_measured_in_ignores_runs_that_did_not_finish(tmp_path: Path) -> None:
    store = _store_with_offline_run(tmp_path / "store", samples_per_s=6000)
    (key,) = store.keys()
    later = store.start_attempt(store.latest(key).spec, key=key)  # type: ignore[union-attr]
    store.update(key, later.attempt, state="failed", error="container exited 137")
    assert measured_in(store)[("a", "digits", Scenario.OFFLINE)].samples_per_s == 6000


def test_server_audits_run_at_the_derated_target_qps() -> None:
    def server_targets(plan) -> dict[RunKind, object]:  # type: ignore[no-untyped-def]
        return {r.spec.kind: r.spec.settings.get("*.Server.target_qps") for r in plan.runs
                if r.spec.scenario is Scenario.SERVER}

    # digits' benchmark.yaml: TEST01 at 0.96 and TEST04 at 0.97 of the performance run's 1500
    assert server_targets(demo_plan()) == {
        RunKind.PERFORMANCE: 1500.0, RunKind.ACCURACY: 1500.0, RunKind.TEST01: 1440.0,
        RunKind.TEST04: 1455.0, RunKind.POWER: 1500.0}
    # the campaign's own factor wins; other scenarios never change
    plan = demo_plan(compliance_derate={"TEST01": 0.9})
    assert server_targets(plan)[RunKind.TEST01] == 1350.0
    offline = {r.spec.settings.get("*.Offline.target_qps") for r in plan.runs
               if r.spec.scenario is Scenario.OFFLINE}
    assert len(offline) == 1
    with pytest.raises(ValueError, match="compliance_derate"):
        Campaign.model_validate({"hosts": [{"host": "a"}], "compliance_derate": {"TEST01": 2}})


def test_a_compliance_test_runs_at_its_reference_attempts_load() -> None:
    """A Server performance run re-run at a lower target moves its tests with it: the test's
    target is the standing attempt's x the test's derate, not the plan's; its own durations
    and counts stay, and so does its run key."""
    from datetime import UTC, datetime

    from bench.execute import compared_spec
    from bench.run import RunRecord, RunState

    plan = demo_plan()
    planned = {(r.spec.scenario, r.spec.kind): r for r in plan.runs}
    perf = planned[(Scenario.SERVER, RunKind.PERFORMANCE)].spec
    rerun = perf.model_copy(update={"settings": {**perf.settings, "*.Server.target_qps": 810.0}})
    standing = RunRecord(spec=rerun, key=perf.key, attempt=3, state=RunState.FINISHED,
                         started_at=datetime.now(UTC))
    for kind, factor in ((RunKind.TEST01, 0.96), (RunKind.TEST04, 0.97)):
        test = planned[(Scenario.SERVER, kind)]
        spec = compared_spec(test, {RunKind.PERFORMANCE: standing})
        assert spec.settings["*.Server.target_qps"] == round(810.0 * factor, 3)
        assert {k: v for k, v in spec.settings.items() if not k.endswith("target_qps")} == \
            {k: v for k, v in test.spec.settings.items() if not k.endswith("target_qps")}
        assert test.spec.key != spec.key  # the planned key files it, whatever its load
    # the latency scenarios take the reference's expected latency, not derated
    ss_perf = planned[(Scenario.SINGLE_STREAM, RunKind.PERFORMANCE)].spec
    tuned = ss_perf.model_copy(update={"settings": {**ss_perf.settings,
                                                    "*.SingleStream.target_latency": 0.123}})
    reference = RunRecord(spec=tuned, key=ss_perf.key, attempt=1, state=RunState.FINISHED,
                          started_at=datetime.now(UTC))
    test04 = planned[(Scenario.SINGLE_STREAM, RunKind.TEST04)]
    spec = compared_spec(test04, {RunKind.PERFORMANCE: reference})
    assert spec.settings["*.SingleStream.target_latency"] == 0.123
    # no reference yet, or not a compliance test: the plan's spec as it is
    assert compared_spec(test04, {}) == test04.spec
    assert compared_spec(planned[(Scenario.SERVER, RunKind.PERFORMANCE)],
                         {RunKind.PERFORMANCE: standing}).settings == perf.settings


def test_a_test_whose_reference_never_passed_is_not_run(tmp_path: Path) -> None:
    """No passing performance attempt: no load to run TEST04 at and nothing to compare it
    with, so the test is refused with the reason, before any attempt; TEST01 names the
    accuracy run it lacks too."""
    from types import SimpleNamespace

    from flows.steps import _unless_compared
    from lab.errors import NotCompared

    plan = demo_plan()
    ctx = SimpleNamespace(store=RunStore(tmp_path / "store"), plan=plan)
    planned = {(r.spec.scenario, r.spec.kind): r for r in plan.runs}
    with pytest.raises(NotCompared, match="compared with the performance run of "
                                          "local/digits/Server, which did not pass"):
        _unless_compared(ctx, planned[(Scenario.SERVER, RunKind.TEST04)], {})  # type: ignore[arg-type]
    with pytest.raises(NotCompared, match="performance run and accuracy run"):
        _unless_compared(ctx, planned[(Scenario.SERVER, RunKind.TEST01)], {})  # type: ignore[arg-type]
    performance = object()  # a passing reference: the test runs
    _unless_compared(ctx, planned[(Scenario.SERVER, RunKind.TEST04)],  # type: ignore[arg-type]
                     {RunKind.PERFORMANCE: performance})  # type: ignore[dict-item]
    _unless_compared(ctx, planned[(Scenario.SERVER, RunKind.PERFORMANCE)], {})  # type: ignore[arg-type]
