"""Compliance verification (TEST01, TEST04, TEST05), writing what the checker reads.

Each `verify_testNN(compliance_dir, refs, out_dir)` compares a compliance run with the reference
runs of the same host, benchmark and scenario and writes `out_dir/TESTNN/` the way the official
`run_verification.py -o out_dir` does (checker.md §6.4-6.5): `verify_accuracy.txt` (TEST01) and
`verify_performance.txt`, each with a line `TEST PASS` or `TEST FAIL...`, and copies of the
compliance logs under `accuracy/` and `performance/run_1/`. For the v6 layout pass the scenario's
results directory as out_dir.

TEST01 compares, per qsl_idx, the first element of each logged response with the accuracy run's;
for a non-deterministic SUT a `Fallback` (the benchmark's accuracy script and the round's rules)
scores both logs and compares the metrics within the round's delta, writing the baseline and
compliance accuracy files the checker then reads.
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bench.accuracy import metric_values
from bench.loadgen_log import (
    ACCURACY_LOG,
    DETAIL,
    SUMMARY,
    iter_accuracy_log,
    read_detail,
    read_summary,
)
from bench.rules import RoundRules
from bench.run import RunKind, Scenario

Dtype = Literal["byte", "int32", "int64", "float32"]
_DECODE = {"byte": "<b", "int32": "<i", "int64": "<q", "float32": "<f"}
DETAIL_SCORE = {"Offline": "result_samples_per_second",
                "Server": "result_completed_samples_per_sec",
                "SingleStream": "early_stopping_latency_ss",
                "MultiStream": "early_stopping_latency_ms"}
PASS = "TEST PASS"


class ComplianceResult(BaseModel):
    """The outcome of verifying one compliance run."""

    model_config = ConfigDict(frozen=True)

    test: RunKind
    passed: bool
    accuracy_passed: bool | None = None  # TEST01 only
    performance_passed: bool | None = None
    reason: str = ""  # plain words, empty when passed
    fix: str = ""
    output_dir: str = ""  # the TESTNN directory written
    official: bool = False  # written by the official run_verification.py


class References(BaseModel):
    """Log directories of the reference runs a compliance run is compared with."""

    model_config = ConfigDict(frozen=True)

    performance_dir: Path  # mlperf_log_detail.txt and mlperf_log_summary.txt
    accuracy_dir: Path | None = None  # mlperf_log_accuracy.json of the accuracy run (TEST01)


@dataclass(frozen=True)
class Fallback:
    """What TEST01's non-deterministic path needs."""

    scorer: Callable[[Path], str]  # accuracy.txt text for a mlperf_log_accuracy.json
    rules: RoundRules
    model: str
    scenario: Scenario


def verify_test01(compliance_dir: Path, refs: References, out_dir: Path, *,
                  dtype: Dtype = "byte", fallback: Fallback | None = None) -> ComplianceResult:
    """TEST01: logged responses equal the accuracy run's; performance within 10% (20%)."""
    if refs.accuracy_dir is None:
        raise ValueError("TEST01 needs the accuracy run's logs (References.accuracy_dir)")
    target = _prepare(out_dir, RunKind.TEST01, compliance_dir)
    acc_lines, acc_ok = _compare_responses(refs.accuracy_dir / ACCURACY_LOG,
                                           compliance_dir / ACCURACY_LOG, dtype)
    (target / "verify_accuracy.txt").write_text("\n".join(acc_lines) + "\n")
    perf_lines, perf_ok = _compare_details(refs.performance_dir / DETAIL,
                                           compliance_dir / DETAIL, tolerance=0.10, relax_ms=True)
    (target / "verify_performance.txt").write_text("\n".join(perf_lines) + "\n")
    accuracy_dir = target / "accuracy"
    shutil.copy2(compliance_dir / ACCURACY_LOG, accuracy_dir / ACCURACY_LOG)
    reasons = [] if perf_ok else [f"performance: {perf_lines[-1]}"]
    scored = fallback.scorer(compliance_dir / ACCURACY_LOG) if fallback else ""
    (accuracy_dir / "accuracy.txt").write_text(scored)
    if not acc_ok and fallback:
        acc_ok, why = _nondeterministic(refs.accuracy_dir / ACCURACY_LOG, compliance_dir,
                                        accuracy_dir, fallback, scored)
        reasons += [] if acc_ok else [f"accuracy (non-deterministic check): {why}"]
    elif not acc_ok:
        reasons.append("accuracy: responses differ from the accuracy run's")
    return ComplianceResult(
        test=RunKind.TEST01, passed=acc_ok and perf_ok, accuracy_passed=acc_ok,
        performance_passed=perf_ok, reason="; ".join(reasons), output_dir=str(target),
        fix="" if acc_ok and perf_ok else "If the SUT is not deterministic, verify with the "
        "benchmark's accuracy script (the non-deterministic check); otherwise make the SUT "
        "answer the same in performance and accuracy mode, and re-run TEST01.")


def verify_test04(compliance_dir: Path, refs: References, out_dir: Path) -> ComplianceResult:
    """TEST04: the same-sample run is not much faster than the performance run (summaries)."""
    target = _prepare(out_dir, RunKind.TEST04, compliance_dir)
    ref = read_summary(refs.performance_dir / SUMMARY)
    test = read_summary(compliance_dir / SUMMARY)
    lines = ["Verifying performance."]
    ok = False
    if not ref.valid or not test.valid:
        lines.append(f"TEST FAIL: {'Reference' if not ref.valid else 'Test'} results are invalid")
    elif ref.scenario != test.scenario:
        lines.append("TEST FAIL: Test and reference scenarios do not match!")
    elif ref.scenario == "Server" and ref.target_latency_ns != test.target_latency_ns:
        lines.append("TEST FAIL: Server target latency mismatch")
    else:
        ref_score, test_score = ref.score() or 0.0, test.score() or 0.0
        relax = (ref.scenario == "SingleStream" and ref_score <= 200000) or (
            ref.scenario == "MultiStream" and ref_score <= 1600000)
        ok = 0 < test_score < ref_score * (1.20 if relax else 1.10)
        lines += [f"reference score = {ref_score}", f"test score = {test_score}",
                  PASS if ok else "TEST FAIL: Test score invalid"]
    (target / "verify_performance.txt").write_text("\n".join(lines) + "\n")
    return ComplianceResult(
        test=RunKind.TEST04, passed=ok, performance_passed=ok, output_dir=str(target),
        reason="" if ok else f"performance: {lines[-1]}",
        fix="" if ok else "A run issuing one sample repeatedly was much faster: the SUT may "
        "cache results across queries. Remove such caching, or re-run both if the reference "
        "run was disturbed.")


def verify_test05(compliance_dir: Path, refs: References, out_dir: Path) -> ComplianceResult:
    """TEST05 (rounds up to v4.1): performance with other seeds within 5% (SS <= 0.2 ms: 20%)."""
    target = _prepare(out_dir, RunKind.TEST05, compliance_dir)
    lines, ok = _compare_details(refs.performance_dir / DETAIL, compliance_dir / DETAIL,
                                 tolerance=0.05, relax_ms=False)
    (target / "verify_performance.txt").write_text("\n".join(lines) + "\n")
    return ComplianceResult(
        test=RunKind.TEST05, passed=ok, performance_passed=ok, output_dir=str(target),
        reason="" if ok else f"performance: {lines[-1]}",
        fix="" if ok else "Performance depends on the sample order: re-run both runs on a "
        "quiet system, then look for seed-specific tuning.")


def verify(kind: RunKind, compliance_dir: Path, refs: References, out_dir: Path, *,
           dtype: Dtype = "byte", fallback: Fallback | None = None) -> ComplianceResult:
    """Verify a TEST01, TEST04 or TEST05 run with our own implementation."""
    compliance_dir = Path(compliance_dir)
    if kind is RunKind.TEST01:
        return verify_test01(compliance_dir, refs, out_dir, dtype=dtype, fallback=fallback)
    if kind is RunKind.TEST04:
        return verify_test04(compliance_dir, refs, out_dir)
    if kind is RunKind.TEST05:
        return verify_test05(compliance_dir, refs, out_dir)
    raise ValueError(f"no built-in verification for {kind}; use bench.compliance_official")


def _prepare(out_dir: Path, kind: RunKind, compliance_dir: Path) -> Path:
    """Create out_dir/TESTNN with copies of the compliance run's performance logs."""
    target = Path(out_dir) / kind.value
    run_1 = target / "performance" / "run_1"
    run_1.mkdir(parents=True, exist_ok=True)
    if kind is RunKind.TEST01:
        (target / "accuracy").mkdir(exist_ok=True)
    for name in (SUMMARY, DETAIL):
        shutil.copy2(Path(compliance_dir) / name, run_1 / name)
    return target


def _first_element(data: str, dtype: Dtype) -> float | None:
    raw = bytes.fromhex(data)
    size = struct.calcsize(_DECODE[dtype])
    return struct.unpack(_DECODE[dtype], raw[:size])[0] if len(raw) >= size else None


def _compare_responses(reference: Path, test: Path, dtype: Dtype) -> tuple[list[str], bool]:
    """Compare the first element per qsl_idx of the compliance log with the accuracy run's."""
    known: dict[int, float | None] = {}
    ref_entries = duplicates = 0
    for entry in iter_accuracy_log(reference):
        ref_entries += 1
        if entry["qsl_idx"] in known:
            duplicates += 1
        else:
            known[entry["qsl_idx"]] = _first_element(entry["data"], dtype)
    test_entries = matched = mismatched = missing = 0
    for entry in iter_accuracy_log(test):
        test_entries += 1
        value = _first_element(entry["data"], dtype)
        if entry["qsl_idx"] in known:
            matched += 1
            mismatched += known[entry["qsl_idx"]] != value
        else:
            missing += 1
        known[entry["qsl_idx"]] = value
    ok = mismatched == 0 and matched > 0
    return [f"Verifying accuracy ({dtype}).", f"num_acc_log_entries = {ref_entries}",
            f"num_acc_log_duplicate_keys = {duplicates}", f"num_perf_log_entries = {test_entries}",
            f"num_perf_log_qsl_idx_match = {matched}",
            f"num_perf_log_data_mismatch = {mismatched}", f"num_missing_qsl_idxs = {missing}",
            PASS if ok else "TEST FAIL"], ok


def _compare_details(reference: Path, test: Path, *, tolerance: float,
                     relax_ms: bool) -> tuple[list[str], bool]:
    """Compare the scores of two detail logs; both must be VALID and of the same scenario."""
    lines = ["Verifying performance."]
    ref, run = read_detail(reference), read_detail(test)
    for log, path in ((ref, reference), (run, test)):
        if not log.valid:
            return [*lines, f"TEST FAIL: Invalid results in {path}"], False
    if ref.scenario != run.scenario:
        return [*lines, "TEST FAIL: Test and reference scenarios do not match!"], False
    if ref.scenario == "Server" and ref.effective.get("target_latency_ns") != run.effective.get(
            "target_latency_ns"):
        return [*lines, "TEST FAIL: Server target latency mismatch"], False
    key = DETAIL_SCORE.get(ref.scenario or "", "")
    ref_score, test_score = float(ref.get(key) or 0), float(run.get(key) or 0)
    if (ref.scenario == "SingleStream" and ref_score <= 200000) or (
            relax_ms and ref.scenario == "MultiStream" and ref_score <= 1600000):
        tolerance = 0.20
    ok = ref_score * (1 - tolerance) <= test_score <= ref_score * (1 + tolerance) and ref_score > 0
    return [*lines, f"Reference score = {ref_score}", f"Test score = {test_score}",
            PASS if ok else f"TEST FAIL: Test score invalid (outside +-{tolerance:.0%})"], ok


def _nondeterministic(reference: Path, compliance_dir: Path, accuracy_dir: Path,
                      fallback: Fallback, compliance_text: str) -> tuple[bool, str]:
    """Score the accuracy run's entries for the sampled qsl_idx and compare metrics."""
    wanted = {e["qsl_idx"] for e in iter_accuracy_log(compliance_dir / ACCURACY_LOG)}
    with tempfile.TemporaryDirectory(prefix="subrun-test01-") as tmp:
        baseline = Path(tmp) / ACCURACY_LOG
        with baseline.open("w") as f:
            separator = "[\n"
            for entry in iter_accuracy_log(reference):
                if entry["qsl_idx"] in wanted:
                    f.write(separator + _entry_line(entry))
                    separator = ",\n"
            f.write("\n]\n" if separator != "[\n" else "[\n]\n")
        baseline_text = fallback.scorer(baseline)
    (accuracy_dir / "baseline_accuracy.txt").write_text(baseline_text)
    (accuracy_dir / "compliance_accuracy.txt").write_text(compliance_text)
    rules = fallback.rules
    targets = rules.accuracy_targets(fallback.model, fallback.scenario)
    if not targets:
        return False, f"bench/rounds/{rules.round}.yaml has no accuracy metric for {fallback.model}"
    for target in targets:
        pattern = rules.accuracy_patterns[target.metric]
        base = (metric_values(baseline_text, pattern) or (0.0,))[-1]
        comp = (metric_values(compliance_text, pattern) or (0.0,))[-1]
        delta = abs(1 - base / comp) * 100 if base and comp else float("inf")
        limit = rules.delta_pct(fallback.model, target.metric)
        if delta > limit:
            return False, (f"{target.metric} baseline {base:g} vs compliance {comp:g}: "
                           f"{delta:.3g}% > {limit:g}%")
    return True, ""


def _entry_line(entry: dict[str, object]) -> str:
    return (f'{{ "seq_id" : {entry.get("seq_id", 0)}, "qsl_idx" : {entry["qsl_idx"]}, '
            f'"data" : "{entry["data"]}" }}')


_SCORE_LINE = re.compile(r"^(reference|test) score\s*=\s*([0-9.eE+-]+)", re.I | re.M)


def test_was_faster(kind: RunKind, scenario: Scenario, verify_performance: str) -> bool | None:
    """Whether a compliance run performed better than its reference, read from the
    `verify_performance.txt` it was judged by (ours or the official scripts', which print the
    same two lines); None when the text has no scores. TEST04 scores are rates for every
    scenario (1e9 / latency for SingleStream and MultiStream); TEST01 and TEST05 compare the
    latency itself in the latency scenarios."""
    scores = {m.group(1).lower(): float(m.group(2))
              for m in _SCORE_LINE.finditer(verify_performance)}
    if "reference" not in scores or "test" not in scores:
        return None
    latency = kind is not RunKind.TEST04 and scenario in (Scenario.SINGLE_STREAM,
                                                          Scenario.MULTI_STREAM)
    if latency:
        return scores["test"] < scores["reference"]
    return scores["test"] > scores["reference"]
