"""Compliance verification of real LoadGen TEST01, TEST04 and TEST05 runs, the files it writes for
the checker, and (given a mlcommons/inference checkout in SUBRUN_INFERENCE_REPO) the official
scripts' agreement with it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.compliance import Fallback, References, verify, verify_test01, verify_test04
from bench.compliance_official import verify_official
from bench.rules import load_rules
from bench.run import Mode, RunKind, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, ShortMode, audit_config, run_settings, user_conf
from bench.verdict import judge_dir
from testkit.loadgen_run import TinySut, run_loadgen, score_accuracy
from testkit.official import INFERENCE

RULES = load_rules("v6.1")
SETTINGS = run_settings(Scenario.OFFLINE, Mode.SHORT, PerfTargets(target_qps=6000),
                        ShortMode(min_duration_ms=500))
SUT = TinySut(sample_time_us=250)  # about 4000 samples/s: Offline runs last about 0.8 s
NOISY = TinySut(sample_time_us=250, deterministic=False)



def spec_for(kind: RunKind) -> RunSpec:
    return RunSpec(host="local", benchmark="tiny", model="resnet", scenario=Scenario.OFFLINE,
                   kind=kind, mode=Mode.SHORT, round="v6.1", settings=SETTINGS)


def run(root: Path, name: str, kind: RunKind, sut: TinySut = SUT,
        settings: dict[str, Setting] | None = None) -> Path:
    audit = audit_config(kind, "resnet", RULES) if kind.is_compliance else None
    return run_loadgen(root / name, scenario="Offline",
                       mode="accuracy" if kind is RunKind.ACCURACY else "performance",
                       user_conf=user_conf(settings or SETTINGS, Mode.SHORT),
                       audit_config=audit, sut=sut)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compliance")
    return {
        "performance": run(root, "performance", RunKind.PERFORMANCE),
        "accuracy": run(root, "accuracy", RunKind.ACCURACY),
        "TEST01": run(root, "test01", RunKind.TEST01),
        "TEST04": run(root, "test04", RunKind.TEST04),
        "TEST05": run(root, "test05", RunKind.TEST05),
    }


@pytest.fixture(scope="module")
def refs(runs: dict[str, Path]) -> References:
    return References(performance_dir=runs["performance"], accuracy_dir=runs["accuracy"])


def test_test01_passes_and_writes_what_the_checker_reads(runs: dict[str, Path],
                                                          refs: References,
                                                          tmp_path: Path) -> None:
    result = verify_test01(runs["TEST01"], refs, tmp_path)
    assert result.passed and result.accuracy_passed and result.performance_passed, result.reason
    test01 = tmp_path / "TEST01"
    assert Path(result.output_dir) == test01
    files = sorted(p.relative_to(test01).as_posix() for p in test01.rglob("*") if p.is_file())
    assert files == ["accuracy/accuracy.txt", "accuracy/mlperf_log_accuracy.json",
                     "performance/run_1/mlperf_log_detail.txt",
                     "performance/run_1/mlperf_log_summary.txt",
                     "verify_accuracy.txt", "verify_performance.txt"]
    accuracy_lines = [line.strip() for line in (test01 / "verify_accuracy.txt").read_text()
                      .splitlines()]
    assert "TEST PASS" in accuracy_lines  # the checker wants a line equal to it
    assert "num_perf_log_data_mismatch = 0" in accuracy_lines
    assert "TEST PASS" in (test01 / "verify_performance.txt").read_text()


def test_compliance_runs_are_judged_with_their_verification(runs: dict[str, Path],
                                                           refs: References,
                                                           tmp_path: Path) -> None:
    for kind in (RunKind.TEST01, RunKind.TEST04, RunKind.TEST05):
        result = verify(kind, runs[kind.value], refs, tmp_path)
        assert result.passed, (kind, result.reason)
        verdict = judge_dir(spec_for(kind), runs[kind.value], compliance=result)
        assert verdict.passed, (kind, verdict.reason)
        checks = {c.name: c for c in verdict.checks}
        assert checks["audit_config"].ok and checks["compliance"].ok
    test05 = judge_dir(spec_for(RunKind.TEST05), runs["TEST05"])
    assert "ignores test05" in next(c.detail for c in test05.checks if c.name == "audit_config")


def test_test04_and_test05_outputs(runs: dict[str, Path], refs: References,
                                   tmp_path: Path) -> None:
    verify(RunKind.TEST04, runs["TEST04"], refs, tmp_path)
    verify(RunKind.TEST05, runs["TEST05"], refs, tmp_path)
    for test in ("TEST04", "TEST05"):
        files = sorted(p.relative_to(tmp_path / test).as_posix()
                       for p in (tmp_path / test).rglob("*") if p.is_file())
        assert files == ["performance/run_1/mlperf_log_detail.txt",
                         "performance/run_1/mlperf_log_summary.txt", "verify_performance.txt"]
        text = (tmp_path / test / "verify_performance.txt").read_text()
        assert "TEST PASS" in text and "reference score" in text.lower()


def test_test04_catches_a_much_faster_same_sample_run(runs: dict[str, Path], refs: References,
                                                      tmp_path: Path) -> None:
    fast_settings = run_settings(Scenario.OFFLINE, Mode.SHORT, PerfTargets(target_qps=25000),
                                 ShortMode(min_duration_ms=500))
    cached = run(tmp_path, "cached", RunKind.TEST04, TinySut(sample_time_us=50), fast_settings)
    result = verify_test04(cached, refs, tmp_path / "out")
    assert not result.passed and "Test score invalid" in result.reason
    assert "cache" in result.fix
    assert "TEST PASS" not in (tmp_path / "out" / "TEST04" / "verify_performance.txt").read_text()


def test_invalid_reference_fails_test01_performance(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "reference"  # fault injection: the reference run judged INVALID
    shutil.copytree(runs["performance"], broken)
    detail = broken / "mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace('"value": "VALID"', '"value": "INVALID"'))
    result = verify_test01(runs["TEST01"], References(performance_dir=broken,
                                                      accuracy_dir=runs["accuracy"]), tmp_path)
    assert not result.passed and result.accuracy_passed and not result.performance_passed
    assert "Invalid results in" in result.reason


def test_nondeterministic_sut_passes_through_the_fallback(tmp_path: Path) -> None:
    accuracy = run(tmp_path, "accuracy", RunKind.ACCURACY, NOISY)
    compliance = run(tmp_path, "test01", RunKind.TEST01, NOISY)
    refs = References(performance_dir=compliance, accuracy_dir=accuracy)
    fallback = Fallback(scorer=score_accuracy, rules=RULES, model="resnet",
                        scenario=Scenario.OFFLINE)
    plain = verify_test01(compliance, refs, tmp_path / "plain")
    assert not plain.passed and not plain.accuracy_passed
    result = verify_test01(compliance, refs, tmp_path / "out", fallback=fallback)
    assert result.passed, result.reason
    folder = tmp_path / "out" / "TEST01" / "accuracy"
    assert sorted(p.name for p in folder.iterdir()) == [
        "accuracy.txt", "baseline_accuracy.txt", "compliance_accuracy.txt",
        "mlperf_log_accuracy.json"]  # exactly the set the checker's fallback wants
    assert "TEST FAIL" in (tmp_path / "out" / "TEST01" / "verify_accuracy.txt").read_text()
    worse = run(tmp_path, "test01-worse", RunKind.TEST01,
                TinySut(sample_time_us=250, deterministic=False, accuracy_pct=50))
    bad = verify_test01(worse, refs, tmp_path / "worse", fallback=fallback)
    assert not bad.passed and "acc baseline 100 vs compliance" in bad.reason


@pytest.mark.official("inference")
@pytest.mark.parametrize("kind", [RunKind.TEST01, RunKind.TEST04])
def test_official_scripts_agree(kind: RunKind, runs: dict[str, Path], refs: References,
                                tmp_path: Path) -> None:
    official = verify_official(kind, runs[kind.value], refs, tmp_path / "official",
                               inference_dir=Path(str(INFERENCE)))
    ours = verify(kind, runs[kind.value], refs, tmp_path / "ours")
    assert official.official and official.passed and ours.passed, official.reason
    for name in ("verify_performance.txt", "performance/run_1/mlperf_log_detail.txt"):
        assert (tmp_path / "official" / kind.value / name).is_file()
