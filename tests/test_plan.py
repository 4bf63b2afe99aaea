"""Planning: run order per host, compliance after its references, estimates per mode."""

from __future__ import annotations

from pathlib import Path

from bench.campaign import Campaign, HostPlan, load_campaign
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import Mode, RunKind, Scenario

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


def test_binding_images_changes_keys_and_refine_uses_measured_times() -> None:
    plan = demo_plan()
    bound = plan.with_images({("local", "digits"): "sha256:abc"}, "6.0.17")
    assert all(a.spec.key != b.spec.key for a, b in zip(plan.runs, bound.runs, strict=True))
    first = bound.runs[0]
    assert bound.refine({first.label: 1.5}).runs[0].estimate_s == 1.5


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
