"""Nightly history: rows from judged runs, trends, and a regression above the threshold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.run import Mode, RunKind, RunRecord, RunSpec, Scenario, Verdict
from submission.history import headline, plot_trends, record, regressions, series


def judged(qps: float, *, passed: bool = True, kind: RunKind = RunKind.PERFORMANCE) -> RunRecord:
    """A judged run; performance runs carry throughput, power runs their watts too."""
    spec = RunSpec(host="h2", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
                   kind=kind, mode=Mode.SHORT, round="v6.1")
    metrics = {"samples_per_second": qps}
    if kind is RunKind.POWER:
        metrics["power_w"] = 100.0
    verdict = Verdict(passed=passed, metrics=metrics)
    return RunRecord(spec=spec, key=spec.key, attempt=1, state="finished",
                     started_at=datetime.now(UTC), verdict=verdict)


def test_headline_prefers_throughput_and_knows_direction() -> None:
    assert headline({"early_stopping_latency_ns": 5.0}) == ("early_stopping_latency_ns", 5.0,
                                                            False)
    assert headline({"samples_per_second": 9.0, "early_stopping_latency_ns": 1.0})[0] \
        == "samples_per_second"  # type: ignore[index]
    assert headline({"unrelated": 1.0}) is None


def test_regression_is_flagged_above_threshold_only(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    start = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    for night, qps in enumerate([1000.0, 1010.0, 990.0, 1005.0]):
        record(db, "nightly", [judged(qps)], when=start + timedelta(days=night))
    assert regressions(db, threshold_pct=5.0) == []
    record(db, "nightly", [judged(900.0), judged(1.0, kind=RunKind.ACCURACY)],
           when=start + timedelta(days=5))
    found = regressions(db, threshold_pct=5.0)
    assert len(found) == 1
    assert found[0].latest == 900.0 and found[0].baseline == 1002.5
    assert "-10.2%" in found[0].describe()
    assert regressions(db, threshold_pct=15.0) == []


def test_failed_runs_are_kept_out_of_trends(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    record(db, "nightly", [judged(1000.0), judged(10.0, passed=False)])
    (qps_series,) = [s for s in series(db) if s.metric == "samples_per_second"]
    assert [p.value for p in qps_series.points] == [1000.0]


def test_trend_plots_are_written(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for night in range(3):
        record(db, "nightly", [judged(1000.0 + night), judged(1.0, kind=RunKind.POWER)],
               when=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=night))
    paths = plot_trends(db, tmp_path / "plots")
    assert len(paths) == 2  # throughput and power
    assert all(p.stat().st_size > 1000 and p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_training_times_make_a_series_and_a_slower_one_is_a_regression(tmp_path: Path) -> None:
    from submission.history import record_training

    db = tmp_path / "history.sqlite"
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for day, minutes in enumerate((1.0, 1.02, 0.99, 1.3)):
        assert record_training(db, "nightly-train", "short", {("h2", "dlrm_dcnv2"): minutes},
                               when=t0 + timedelta(days=day)) == 1
    (found,) = series(db)
    assert (found.benchmark, found.scenario, found.metric) == ("dlrm_dcnv2", "training",
                                                               "time_to_train_min")
    assert not found.higher_is_better
    (regression,) = regressions(db)
    assert regression.latest == 1.3 and regression.change_pct > 25
