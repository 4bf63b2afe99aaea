"""mlperf-logging's judges on a Training package: package_checker's verdict, result_summarizer's
scores, and rcp_checker's status on the runs so far.

package_checker and result_summarizer run as the submitter runs them (`python -m ...` in a
working folder of their own, where they leave their logs); package_checker exits 0 whatever it
finds, so its verdict is its closing line and its ERROR lines. The summarizer's scores are read
from the CSV it writes, one row per system (its file name is the end of `details_url`).
"""

from __future__ import annotations

import csv
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.rcp_checker import rcp_checker

from lab.errors import SubrunError

PASSED_LINE = "PACKAGE CHECKER FOUND NO ERRORS"
TIMEOUT_S = 600


@dataclass(frozen=True)
class PackageVerdict:
    """package_checker's verdict on a package."""

    passed: bool
    errors: list[str] = field(default_factory=list)  # its ERROR lines
    log: Path | None = None  # its full output


@dataclass(frozen=True)
class RcpStatus:
    """Where the runs so far stand against the ruleset's Reference Convergence Points."""

    state: str  # passed, failed, pending, not applicable
    message: str


def _module(name: str, args: Sequence[str], work_dir: Path) -> tuple[int, str]:
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([sys.executable, "-m", name, *args], cwd=work_dir, text=True,
                              capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        raise SubrunError(f"{name} did not finish within {TIMEOUT_S} s on {args[0]}.") from e
    return done.returncode, done.stdout + done.stderr


def check_package(org: Path, ruleset: str, work_dir: Path) -> PackageVerdict:
    """`python -m mlperf_logging.package_checker <org> training <ruleset>`, its verdict."""
    code, output = _module("mlperf_logging.package_checker",
                           [str(org), "training", ruleset], work_dir)
    log = work_dir / "package_checker.out"
    log.write_text(output)
    errors = [line for line in output.splitlines() if line.startswith(("ERROR", "CRITICAL"))]
    if code != 0:
        errors.append(f"package_checker exited with status {code}: "
                      f"{(output.strip().splitlines() or [''])[-1]}")
    return PackageVerdict(code == 0 and PASSED_LINE in output and not errors, errors, log)


def summarize(org: Path, ruleset: str, work_dir: Path) -> dict[tuple[str, str], float]:
    """result_summarizer's score (minutes) per (system, benchmark) of the package."""
    out = work_dir / "summary.csv"
    code, output = _module("mlperf_logging.result_summarizer",
                           [str(org), "training", ruleset, "--csv", str(out)], work_dir)
    (work_dir / "result_summarizer.out").write_text(output)
    if code != 0 or not out.is_file():
        tail = (output.strip().splitlines() or [""])[-1]
        raise SubrunError(f"result_summarizer failed on {org} (status {code}): {tail}")
    scores = {}
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        system = Path(row.get("details_url", "")).stem
        for column, value in row.items():
            if value and _is_number(value) and column not in _NOT_BENCHMARKS:
                scores[(system, column)] = float(value)
    return scores


_NOT_BENCHMARKS = {"number_of_nodes", "host_processors_count", "accelerators_count"}


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def has_rcps(benchmark: str, ruleset: str) -> bool:
    """Whether mlperf-logging carries RCPs for benchmark under ruleset."""
    folder = Path(rcp_checker.__file__).parent / f"training_{ruleset}"
    return (folder / f"rcps_{benchmark}.json").is_file()


def rcp_status(logs: Sequence[Path], benchmark: str, ruleset: str, division: str,
               required: int) -> RcpStatus:
    """rcp_checker on the converged runs so far (closed division only, as package_checker)."""
    if division != "closed":
        return RcpStatus("not applicable", "RCPs apply to the closed division only; "
                         "package_checker does not check open results against them")
    if not has_rcps(benchmark, ruleset):
        return RcpStatus("not applicable", f"ruleset {ruleset} has no RCPs for {benchmark}")
    if len(logs) < min(required, 3):
        return RcpStatus("pending", f"{len(logs)} of {required} runs; RCPs are checked from 3")
    with tempfile.TemporaryDirectory(prefix="subrun-rcp-") as tmp:
        for i, log in enumerate(logs):
            shutil.copyfile(log, Path(tmp) / f"result_{i}.txt")
        try:
            passed, message, _ = rcp_checker.check_directory(
                tmp, "training", ruleset, False, False, rcp_pass="pruned_rcps")
        except Exception as e:  # its statistics raise on too few or odd runs
            return RcpStatus("pending", f"rcp_checker could not judge yet: {e}")
    return RcpStatus("passed" if passed else "failed", str(message))
