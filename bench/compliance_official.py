"""Compliance verification with the official scripts of a mlcommons/inference checkout.

`verify_official(kind, compliance_dir, refs, out_dir, inference_dir=...)` runs
`compliance/<TEST>/run_verification.py -r RESULTS -c COMPLIANCE -o out_dir` (checker.md §6.4)
and reads back what it wrote. The scripts expect RESULTS to be a submission scenario directory,
so one is laid out in a temporary directory with links to the reference runs' logs; they write
into their working directory first, so they run in another temporary directory. They need numpy,
and TEST01's performance check imports tools/submission/log_parser.py from the same checkout.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.compliance import PASS, ComplianceResult, Dtype, References
from bench.loadgen_log import ACCURACY_LOG, DETAIL, SUMMARY
from bench.run import RunKind
from lab.errors import CommandTimedOut, ConfigError, RunError
from lab.host import CommandResult
from lab.local import LocalHost

OFFICIAL_TESTS = (RunKind.TEST01, RunKind.TEST04)


def verify_official(kind: RunKind, compliance_dir: Path, refs: References, out_dir: Path, *,
                    inference_dir: Path, python: str = sys.executable, dtype: Dtype = "byte",
                    timeout_s: float = 1800.0) -> ComplianceResult:
    """Verify a TEST01 or TEST04 run with the official run_verification.py."""
    script = Path(inference_dir) / "compliance" / kind.value / "run_verification.py"
    if kind not in OFFICIAL_TESTS:
        raise ConfigError(f"Official verification is wired for {', '.join(OFFICIAL_TESTS)} "
                          f"only, not {kind}.")
    if not script.is_file():
        raise ConfigError(f"{script} not found: inference_dir must be a checkout of "
                          "mlcommons/inference (with compliance/ and tools/submission/).")
    with tempfile.TemporaryDirectory(prefix="subrun-verify-") as tmp:
        results = _results_dir(Path(tmp) / "results", refs, kind)
        work = Path(tmp) / "work"
        work.mkdir()
        argv = [python, str(script), "-r", str(results), "-c", str(Path(compliance_dir)),
                "-o", str(Path(out_dir).resolve())]
        if kind is RunKind.TEST01:
            argv += ["--dtype", dtype]
        try:
            done = LocalHost("controller", str(work)).run(argv, check=False,
                                                          timeout_s=timeout_s, cwd=str(work))
        except (OSError, CommandTimedOut) as e:
            raise RunError(f"Could not run {script}: {e}.") from e
    target = Path(out_dir) / kind.value
    return _read_back(kind, target, done)


def _results_dir(results: Path, refs: References, kind: RunKind) -> Path:
    """A scenario directory of links, laid out as the scripts expect."""
    run_1 = results / "performance" / "run_1"
    run_1.mkdir(parents=True)
    for name in (DETAIL, SUMMARY):
        (run_1 / name).symlink_to((refs.performance_dir / name).resolve())
    if kind is RunKind.TEST01:
        if refs.accuracy_dir is None:
            raise ValueError("TEST01 needs the accuracy run's logs (References.accuracy_dir)")
        (results / "accuracy").mkdir()
        (results / "accuracy" / ACCURACY_LOG).symlink_to(
            (refs.accuracy_dir / ACCURACY_LOG).resolve())
    return results


def _read_back(kind: RunKind, target: Path, done: CommandResult) -> ComplianceResult:
    perf_file = target / "verify_performance.txt"
    if not perf_file.is_file():
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RunError(f"The official {kind} verification wrote no {perf_file} (exit "
                       f"{done.exit_status}): {tail}. It needs numpy and a full checkout.")
    perf_ok = PASS in perf_file.read_text()
    acc_ok: bool | None = None
    if kind is RunKind.TEST01:
        acc_file = target / "verify_accuracy.txt"
        lines = acc_file.read_text().splitlines() if acc_file.is_file() else []
        acc_ok = PASS in (line.strip() for line in lines)
    passed = perf_ok and acc_ok is not False
    reasons = [part for part, ok in (("accuracy", acc_ok), ("performance", perf_ok))
               if ok is False]
    return ComplianceResult(test=kind, passed=passed, accuracy_passed=acc_ok,
                            performance_passed=perf_ok, output_dir=str(target), official=True,
                            reason="" if passed else f"official {kind} verification failed: "
                            f"{' and '.join(reasons)} (see {target})")
