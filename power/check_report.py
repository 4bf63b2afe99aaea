"""power-dev's own verdict on a power run (`compliance/check.py`), read and combined with
subrun's verdict of the same run.

check.py prints `[x] <check>` for a pass and `[ ] <check>` for a failure followed by the reason.
Its "Check PTD commands and replies" fails first of all on PTDaemon's version: subrun's daemon
identifies itself honestly, so with it that one check fails by design. The failure is reported
in the verdict and makes the run unsubmittable; it does not fail the run. Any other failed
check (or a check.py that printed no checks at all) fails the run.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.run import Check, Verdict
from lab.errors import CommandTimedOut
from lab.local import LocalHost

IDENTITY_CHECK = "Check PTD commands and replies"
_LINE = re.compile(r"\[( |x)\] (.+?)\s*$")
CHECK_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class CheckReport:
    """The checks check.py ran: the names that passed, the failures with their reasons."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed)


def parse_check(text: str) -> CheckReport:
    """The checks in check.py's output (its log lines may carry a logging prefix)."""
    report = CheckReport()
    current: str | None = None
    for line in text.splitlines():
        found = _LINE.search(line)
        if found:
            current = None
            if found.group(1) == "x":
                report.passed.append(found.group(2))
            else:
                current = found.group(2)
                report.failed[current] = ""
        elif current is not None and line.strip() and not report.failed[current]:
            report.failed[current] = line.split("\t", 1)[-1].strip()  # the reason follows
    return report


def power_checks(report: CheckReport, identity: str) -> tuple[list[Check], bool]:
    """The verdict checks for power-dev's report, and whether it allows a submission."""
    ours = "subrun" in identity  # subrun's daemon says what it is; SPEC PTDaemon does not
    if report.total == 0:
        return [Check(name="power_dev_check", ok=False,
                      detail="power-dev's compliance/check.py reported no checks; see "
                             "power_check.txt")], False
    checks, submittable = [], not report.failed
    for name, reason in report.failed.items():
        if name == IDENTITY_CHECK and ours:
            checks.append(Check(name="ptd_identity", ok=True, detail=(
                f"power-dev's '{name}' failed: {reason or 'see power_check.txt'}. The analyzer "
                f"daemon is subrun's ('{identity}'), not SPEC PTDaemon, so this result is not "
                "submittable")))
        else:
            checks.append(Check(name="power_dev_check", ok=False,
                                detail=f"power-dev's '{name}' failed: {reason}".rstrip(": ")))
    real = [c for c in checks if not c.ok]
    summary = (f"power-dev's compliance/check.py: {len(report.passed)} of {report.total} "
               "checks passed")
    checks.insert(0, Check(name="power_dev_check_summary", ok=not real, detail=summary))
    return checks, submittable


def with_power(verdict: Verdict, checks: list[Check], submittable: bool,
               metrics: dict[str, float]) -> Verdict:
    """subrun's verdict of the testing run with power-dev's checks and the power metrics."""
    failing = [c for c in checks if not c.ok]
    reason = "; ".join(x for x in (verdict.reason, *(c.detail for c in failing)) if x)
    fix = verdict.fix
    if failing:
        fix = (fix + " " if fix else "") + ("Read power_check.txt in the run store; fix the "
                                            "director or analyzer it names, then re-run.")
    return verdict.model_copy(update={
        "passed": verdict.passed and not failing, "checks": [*verdict.checks, *checks],
        "reason": reason, "fix": fix, "metrics": {**verdict.metrics, **metrics},
        "submittable": verdict.submittable and submittable and not failing})


def run_check(checkout: Path, folder: Path, python: str = sys.executable) -> tuple[bool, str]:
    """power-dev's compliance/check.py on a run's folder, on the controller: (passed, all it
    printed). A check.py that cannot start or runs out of time has not passed, and says why."""
    argv = [python, str(checkout / "compliance" / "check.py"), str(folder)]
    try:
        done = LocalHost("controller", str(folder)).run(argv, check=False,
                                                        timeout_s=CHECK_TIMEOUT_S)
    except CommandTimedOut as e:
        return False, f"could not run {checkout}/compliance/check.py: {e}\n"
    return done.ok, done.stdout + done.stderr
