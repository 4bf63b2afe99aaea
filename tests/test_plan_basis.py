"""Plans from measurements: which evidence each estimate rests on (tuned > measured > default),
LoadGen's sample arithmetic against a tuned rate, measured overheads, and the report's
estimate vs actual from a kept plan and a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.estimate import RUN_OVERHEAD_S
from bench.evidence import Evidence, gather
from bench.manifest import load_manifest
from bench.measured import Basis
from bench.overhead import overheads_in
from bench.plan import Plan, make_plan
from bench.plan_record import compare, read_plan, write_plan
from bench.rules import load_rules
from bench.run import RunKind, RunSpec, RunState, Scenario, Verdict
from bench.store import RunStore
from bench.tuning_record import Probe, TuningBook, TuningKey
from submission import estimates_view

IMAGE_A, IMAGE_B, LOADGEN = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "6.0.17 @ test"
MANIFESTS = {"digits": load_manifest("digits")}
RULES = load_rules("v6.1")
# digits' Offline target_qps in benchmark.yaml: what LoadGen issues without a better basis
DEFAULT_QPS = MANIFESTS["digits"].user_conf_defaults(Scenario.OFFLINE)["target_qps"]
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def campaign(**update: object) -> Campaign:
    base = {"mode": "submission", "power": False, "accuracy": False, "compliance": False,
            "hosts": [{"host": "a", "benchmarks": [{"benchmark": "digits",
                                                    "scenarios": ["Offline"]}]}]}
    return Campaign.model_validate({**base, **update})


def planned(evidence: Evidence, image: str | None = IMAGE_A, **update: object) -> Plan:
    """The campaign's plan, bound to image (the flow's second estimate) unless None."""
    plan = make_plan(campaign(**update), MANIFESTS, RULES, evidence)
    if image is None:
        return plan
    return plan.with_images({("a", "digits"): image}, LOADGEN).reestimated(
        MANIFESTS, RULES, evidence)


def store_run(store: RunStore, spec: RunSpec, *, rate: float | None = None,
              started: datetime = T0, wall_s: float = 10.0, settle_s: float = 0.0,
              detail_ms: float | None = None, samples: int = 0) -> None:
    """A finished attempt of spec in store, measuring rate, lasting wall_s."""
    record = store.start_attempt(spec, started_at=started)
    if detail_ms is not None:  # collected as a run leaves it
        collected = store.root.parent / f"collected-{record.key}-{record.attempt}"
        (collected / "output").mkdir(parents=True)
        (collected / "output" / "mlperf_log_detail.txt").write_text(
            f':::MLLOG {{"key": "loadgen_git_log_message", "value": "{"x" * 20000}"}}\n'
            f':::MLLOG {{"key": "effective_accuracy_sample_count", "value": {samples}}}\n'
            f':::MLLOG {{"key": "power_end", "time_ms": {detail_ms}}}\n')
        store.add_files(record.key, record.attempt, collected)
    store.update(record.key, record.attempt, state=RunState.FINISHED, settle_s=settle_s,
                 finished_at=started + timedelta(seconds=wall_s),
                 verdict=Verdict(passed=True, metrics={"samples_per_second": rate}
                                 if rate else {}))


def offline_spec(image: str) -> RunSpec:
    (run,) = planned(Evidence(), image).runs
    return run.spec


def tuned_book(root: Path, image: str, rate: float) -> TuningBook:
    book = TuningBook(root)
    key = TuningKey("a", "digits", Scenario.OFFLINE, image, LOADGEN, "v6.1")
    for qps in (rate * 0.8, rate):
        book.add_probe(key, Probe(settings={"*.Offline.target_qps": qps}, valid=True,
                                  samples_per_s=qps, duration_s=12.0, at=T0))
    book.finish(key, chosen={"*.Offline.target_qps": rate}, found=rate, margin=0.0)
    return book


def test_tuned_beats_measured_beats_default(tmp_path: Path) -> None:
    (default,) = planned(Evidence()).runs
    assert default.basis is Basis.DEFAULT
    store = RunStore(tmp_path / "out" / "c" / "store")
    store_run(store, offline_spec(IMAGE_A), rate=6000)
    measured = gather(tmp_path / "out", store.root, {})
    (run,) = planned(measured).runs
    assert run.basis is Basis.MEASURED and "measured by a/digits/Offline" in run.assumption
    tuned_book(tmp_path / "out" / "tuning", IMAGE_A, 5000)
    both = gather(tmp_path / "out", store.root, {}, tmp_path / "out" / "tuning")
    (run,) = planned(both).runs
    assert run.basis is Basis.TUNED and "found by tuning of a/digits/Offline" in run.assumption
    samples = 1.1 * DEFAULT_QPS * RULES.min_duration_ms / 1000
    assert run.estimate_s == pytest.approx(samples / 5000 + RUN_OVERHEAD_S)
    plan = planned(both)
    assert plan.defaults() == [] and planned(Evidence()).defaults() == planned(Evidence()).runs


def test_a_stale_tuning_record_is_ignored(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "out" / "c" / "store")
    store_run(store, offline_spec(IMAGE_A), rate=6000)
    tuned_book(tmp_path / "tuning", IMAGE_B, 5000)  # another image: stale for IMAGE_A
    evidence = gather(tmp_path / "out", store.root, {}, tmp_path / "tuning")
    (run,) = planned(evidence).runs
    assert run.basis is Basis.MEASURED and "tuning" not in run.assumption
    tuned_book(tmp_path / "tuning2", IMAGE_B, 5000)
    (alone,) = planned(gather(tmp_path / "empty", tmp_path / "none", {},
                              tmp_path / "tuning2")).runs
    assert alone.basis is Basis.DEFAULT


def test_before_images_are_bound_the_rounds_newest_tuning_record_is_used_and_said(
        tmp_path: Path) -> None:
    tuned_book(tmp_path / "tuning", IMAGE_B, 5000)
    evidence = gather(tmp_path / "empty", tmp_path / "none", {}, tmp_path / "tuning")
    (run,) = planned(evidence, image=None).runs
    assert run.basis is Basis.TUNED
    assert "image digest is unknown at plan time" in run.assumption


def test_the_same_images_measurement_is_preferred_over_a_newer_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "out" / "c" / "store")
    store_run(store, offline_spec(IMAGE_A), rate=6000, started=T0)
    store_run(store, offline_spec(IMAGE_B), rate=9000, started=T0 + timedelta(hours=1))
    evidence = gather(tmp_path / "out", store.root, {})
    samples = 1.1 * DEFAULT_QPS * RULES.min_duration_ms / 1000
    (same,) = planned(evidence, IMAGE_A).runs
    assert same.estimate_s == pytest.approx(samples / 6000 + RUN_OVERHEAD_S)
    (unbound,) = planned(evidence, image=None).runs  # `subrun plan`: the newest, said so
    assert unbound.estimate_s == pytest.approx(samples / 9000 + RUN_OVERHEAD_S)
    assert "image digest is unknown at plan time" in unbound.assumption
    (other,) = planned(evidence, "sha256:" + "c" * 64).runs
    assert "no run of this image measured it yet" in other.assumption


def test_an_offline_target_above_the_tuned_rate_lengthens_the_run_and_says_so(
        tmp_path: Path) -> None:
    """LoadGen issues 1.1 x target_qps x min_duration samples whatever the host reaches."""
    tuned_book(tmp_path / "tuning", IMAGE_A, 4000)
    evidence = gather(tmp_path / "empty", tmp_path / "none", {"a": 2.0}, tmp_path / "tuning")
    (run,) = planned(evidence, hosts=[{"host": "a", "benchmarks": [{
        "benchmark": "digits", "scenarios": ["Offline"],
        "settings": {"Offline": {"target_qps": 20000}}}]}]).runs
    samples = 1.1 * 20000 * RULES.min_duration_ms / 1000
    assert run.estimate_s == pytest.approx(samples / 4000 + RUN_OVERHEAD_S + 2.0)  # + settle_s
    assert "target_qps 20000 is above the 4000 samples/s found by tuning" in run.assumption
    assert "set target_qps near 4000" in run.assumption


def test_overheads_come_from_the_store_when_it_has_them(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "out" / "c" / "store")
    spec = offline_spec(IMAGE_A)
    store_run(store, spec, rate=6000, wall_s=7.0, detail_ms=2000.0)  # 5 s around LoadGen
    later = spec.model_copy(update={"kind": RunKind.TEST04})
    store_run(store, later, started=T0 + timedelta(seconds=8.5), wall_s=4.0, settle_s=0.5,
              detail_ms=2000.0)  # 2 s around LoadGen, 1 s hand-off
    overhead = overheads_in([store])["a"]
    assert overhead.handoff_s == pytest.approx(1.0)
    assert overhead.for_kind(RunKind.PERFORMANCE) == pytest.approx(6.0)
    assert overhead.for_kind(RunKind.TEST01) == pytest.approx(4.5)  # the median of the others
    assert overhead.for_kind(RunKind.ACCURACY) is None
    (run,) = planned(gather(tmp_path / "out", store.root, {"a": 0.5})).runs
    samples = 1.1 * DEFAULT_QPS * RULES.min_duration_ms / 1000
    assert run.estimate_s == pytest.approx(samples / 6000 + 6.0 + 0.5)


def test_an_accuracy_run_is_estimated_from_the_last_accuracy_runs_rate(tmp_path: Path) -> None:
    """An accuracy run logs every response: its own rate, not the performance run's, counts."""
    store = RunStore(tmp_path / "out" / "c" / "store")
    perf, accuracy = planned(Evidence(), accuracy=True).runs
    store_run(store, perf.spec, rate=6000)
    store_run(store, accuracy.spec, started=T0 + timedelta(seconds=10), wall_s=30.0,
              detail_ms=25000.0, samples=50000)  # 2000 samples/s
    _, estimated = planned(gather(tmp_path / "out", store.root, {}), accuracy=True).runs
    assert estimated.basis is Basis.MEASURED
    assert "a/digits/Offline/accuracy" in estimated.assumption
    assert estimated.estimate_s == pytest.approx(50000 / 2000 + 5.0)  # its measured overhead


def test_the_report_compares_the_kept_plan_with_the_store(tmp_path: Path) -> None:
    plan = planned(Evidence(), accuracy=True)
    kept = write_plan(plan, tmp_path / "plan.json")
    assert read_plan(tmp_path / "plan.json") == kept
    store = RunStore(tmp_path / "store")
    perf, accuracy = plan.runs
    start = kept.written_at + timedelta(seconds=1)
    store_run(store, perf.spec, rate=6000, started=start, wall_s=perf.estimate_s * 1.25,
              settle_s=1.0)
    found = compare(kept, store)
    assert [r.attempts for r in found.runs] == [1, 0]
    assert found.runs[0].actual_s == pytest.approx(perf.estimate_s * 1.25 + 1.0)
    assert found.runs[1].actual_s is None
    (host,) = found.hosts
    assert host.estimate_s == pytest.approx(perf.estimate_s)  # only what ran under the plan
    assert host.actual_s == pytest.approx(perf.estimate_s * 1.25 + 1.0)
    assert host.diff_pct is not None and host.diff_pct < -15
    assert host.line().startswith(f"a: estimated {perf.estimate_s // 60:.0f} min")
    lines = estimates_view.section(found)
    text = "\n".join(lines)
    assert "## Estimate vs actual" in text
    assert f"| {perf.label} |" in text and f"| {accuracy.label} |" in text
    assert "| not run |" in text and "**default**" in text
    assert "2 of 2 estimates rested on defaults" in text
    assert set(estimates_view.figures(found)) == {"estimates.png"}
