"""Verdicts on real LoadGen runs: one run per failure class, and VALID short runs that pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.rules import load_rules
from bench.run import Check, Mode, RunKind, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, ShortMode, audit_config, run_settings, user_conf
from bench.verdict import RunFiles, judge, judge_dir
from testkit.loadgen_run import TinySut, run_loadgen

SHORT = ShortMode(min_duration_ms=500)
FAST = TinySut(sample_time_us=250)  # about 4000 samples/s
VALID_SETUP: dict[Scenario, tuple[PerfTargets, TinySut]] = {
    Scenario.SINGLE_STREAM: (PerfTargets(target_latency_ms=0.2), TinySut(sample_time_us=400)),
    Scenario.MULTI_STREAM: (PerfTargets(target_latency_ms=0.1), TinySut(sample_time_us=50)),
    Scenario.OFFLINE: (PerfTargets(target_qps=6000), FAST),
    Scenario.SERVER: (PerfTargets(target_qps=1000), FAST),
}


def make_spec(scenario: Scenario, targets: PerfTargets, *, kind: RunKind = RunKind.PERFORMANCE,
              mode: Mode = Mode.SHORT, settings: dict[str, Setting] | None = None) -> RunSpec:
    return RunSpec(host="local", benchmark="tiny", model="resnet", scenario=scenario, kind=kind,
                   mode=mode, round="v6.1",
                   settings=settings or run_settings(scenario, mode, targets, SHORT))


def execute(root: Path, name: str, spec: RunSpec, sut: TinySut, *, with_audit: bool = True,
            user_conf_loads: int = 1) -> Path:
    """Run spec with the real LoadGen the way the harness contract says; return the run dir."""
    audit = audit_config(spec.kind, spec.model, load_rules(spec.round)) \
        if spec.kind.is_compliance and with_audit else None
    run_loadgen(root / name, scenario=spec.scenario.loadgen,
                mode="accuracy" if spec.kind is RunKind.ACCURACY else "performance",
                user_conf=user_conf(spec.settings, spec.mode), audit_config=audit, sut=sut,
                user_conf_loads=user_conf_loads)
    return root / name


def failed(verdict_checks: list[Check], name: str) -> bool:
    return any(c.name == name and not c.ok for c in verdict_checks)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verdicts")


@pytest.fixture(scope="module")
def offline_valid(root: Path) -> tuple[RunSpec, Path]:
    targets, sut = VALID_SETUP[Scenario.OFFLINE]
    spec = make_spec(Scenario.OFFLINE, targets)
    return spec, execute(root, "offline-valid", spec, sut)


@pytest.mark.parametrize("scenario", list(VALID_SETUP))
def test_valid_short_runs_pass_but_are_not_submittable(root: Path, scenario: Scenario) -> None:
    targets, sut = VALID_SETUP[scenario]
    spec = make_spec(scenario, targets)
    verdict = judge_dir(spec, execute(root, f"valid-{scenario.value}", spec, sut))
    assert verdict.passed, verdict.reason
    assert not verdict.submittable and verdict.reason == "" and verdict.rerun_settings is None
    names = {c.name for c in verdict.checks}
    assert {"valid", "seeds", "loadgen_errors", "min_duration", "scenario"} <= names
    short = [c for c in verdict.checks if c.detail.startswith("short mode:")]
    assert any(c.name == "min_duration" for c in short)
    assert verdict.metrics and all(v > 0 for v in verdict.metrics.values())


def test_invalid_offline_gets_a_higher_target_that_then_passes(root: Path) -> None:
    spec = make_spec(Scenario.OFFLINE, PerfTargets(target_qps=1000))
    verdict = judge_dir(spec, execute(root, "offline-invalid", spec, FAST))
    assert not verdict.passed and failed(verdict.checks, "valid")
    assert "INVALID" in verdict.reason and "min duration" in verdict.reason
    assert verdict.rerun_settings is not None
    new_qps = verdict.rerun_settings["*.Offline.target_qps"]
    assert isinstance(new_qps, float) and new_qps > 1000
    assert new_qps == pytest.approx(verdict.metrics["samples_per_second"] * 1.1, rel=1e-3)
    rerun = spec.model_copy(update={"settings": verdict.rerun_settings})
    assert rerun.key != spec.key
    again = judge_dir(rerun, execute(root, "offline-rerun", rerun, FAST))
    assert again.passed, again.reason


def test_overloaded_server_gets_a_lower_target(root: Path) -> None:
    spec = make_spec(Scenario.SERVER, PerfTargets(target_qps=1500))
    slow = TinySut(sample_time_us=2000)  # about 500 samples/s
    verdict = judge_dir(spec, execute(root, "server-overloaded", spec, slow))
    assert not verdict.passed and failed(verdict.checks, "valid")
    assert "latency constraint" in verdict.reason or "early stopping" in verdict.reason
    assert verdict.rerun_settings is not None
    new_qps = verdict.rerun_settings["*.Server.target_qps"]
    assert isinstance(new_qps, float) and new_qps < 1500
    assert new_qps == pytest.approx(verdict.metrics["completed_samples_per_second"] * 0.9,
                                    rel=1e-4)
    assert "lower target_qps" in verdict.fix


def test_log_of_another_round_fails_on_seeds(offline_valid: tuple[RunSpec, Path]) -> None:
    spec, run_dir = offline_valid
    other = spec.model_copy(update={"round": "v6.0"})
    verdict = judge_dir(other, run_dir)
    assert not verdict.passed and failed(verdict.checks, "seeds")
    assert "seeds are those of v6.1" in verdict.reason and "not of v6.0" in verdict.reason
    assert "LoadGen release of v6.0" in verdict.fix
    assert judge_dir(spec, run_dir).passed


def test_short_run_judged_for_submission_is_too_short(offline_valid: tuple[RunSpec, Path]) -> None:
    spec, run_dir = offline_valid
    as_submission = spec.model_copy(update={"mode": Mode.SUBMISSION})
    verdict = judge_dir(as_submission, run_dir)
    assert not verdict.passed and not verdict.submittable
    assert failed(verdict.checks, "min_duration")
    assert "min_duration_ms 500 < 600000" in verdict.reason
    assert failed(verdict.checks, "samples_per_query")  # Offline resnet needs 24576 per query
    assert "Remove min_duration from user.conf" in verdict.fix


def test_loadgen_error_fails_the_run(root: Path) -> None:
    targets, sut = VALID_SETUP[Scenario.OFFLINE]
    spec = make_spec(Scenario.OFFLINE, targets)
    verdict = judge_dir(spec, execute(root, "two-confs", spec, sut, user_conf_loads=2))
    assert not verdict.passed and failed(verdict.checks, "loadgen_errors")
    assert "Multiple conf files" in verdict.reason
    assert "load user.conf once" in verdict.fix


def test_singlestream_out_of_queries_is_an_error_with_a_rerun(root: Path) -> None:
    spec = make_spec(Scenario.SINGLE_STREAM, PerfTargets(target_latency_ms=2))
    verdict = judge_dir(spec, execute(root, "ss-out-of-queries", spec, TinySut()))
    assert not verdict.passed
    assert failed(verdict.checks, "loadgen_errors") and "Ran out of generated queries" in \
        verdict.reason
    assert verdict.rerun_settings is not None
    new_latency = verdict.rerun_settings["*.SingleStream.target_latency"]
    assert isinstance(new_latency, float) and new_latency < 2


@pytest.mark.parametrize(("accuracy_pct", "passes"), [(100.0, True), (70.0, False)])
def test_accuracy_against_target(root: Path, accuracy_pct: float, passes: bool) -> None:
    targets, _ = VALID_SETUP[Scenario.OFFLINE]
    spec = make_spec(Scenario.OFFLINE, targets, kind=RunKind.ACCURACY)
    run_dir = execute(root, f"accuracy-{accuracy_pct:g}", spec, TinySut(accuracy_pct=accuracy_pct))
    verdict = judge_dir(spec, run_dir)
    assert verdict.passed is passes, verdict.reason
    accuracy_check = next(c for c in verdict.checks if c.name == "accuracy")
    assert accuracy_check.ok is passes
    assert verdict.metrics["acc"] == pytest.approx(accuracy_pct, abs=2)
    if not passes:
        assert "accuracy below target: acc 70" in verdict.reason
        assert "needs >= 75.6954" in verdict.reason
    else:  # 1024 samples of a 50000-sample dataset: fine in short mode, never submittable
        assert not verdict.submittable
        as_submission = spec.model_copy(update={"mode": Mode.SUBMISSION})
        strict = judge_dir(as_submission, run_dir)
        assert failed(strict.checks, "dataset") and "covered 1024 samples" in strict.reason


def test_compliance_kind_without_audit_config_is_not_a_compliance_run(root: Path) -> None:
    targets, sut = VALID_SETUP[Scenario.OFFLINE]
    spec = make_spec(Scenario.OFFLINE, targets, kind=RunKind.TEST01)
    verdict = judge_dir(spec, execute(root, "test01-no-audit", spec, sut, with_audit=False))
    assert not verdict.passed and failed(verdict.checks, "audit_config")
    assert "not a compliance run" in verdict.reason
    assert "working directory" in verdict.fix


def test_missing_detail_log_is_a_failed_verdict(tmp_path: Path) -> None:
    spec = make_spec(Scenario.OFFLINE, PerfTargets(target_qps=10))
    verdict = judge(spec, RunFiles(logs_dir=str(tmp_path)))
    assert not verdict.passed and "mlperf_log_detail.txt" in verdict.reason
    assert judge_dir(spec, tmp_path).reason == verdict.reason
    (tmp_path / "mlperf_log_detail.txt").write_text("Traceback (most recent call last):\n")
    damaged = judge_dir(spec, tmp_path)
    assert not damaged.passed and "not a LoadGen detail log" in damaged.reason
