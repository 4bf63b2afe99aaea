#!/usr/bin/env python3
"""The whole test suite in two phases, then the 25 slowest tests of both.

Most of the suite waits (on LoadGen's fixed durations, Prefect servers, SSH links, an analyzer's
pauses) with a core idle, so the rest can run in pytest-xdist workers, one test module per group
(`tests/conftest.py` groups them). The tests that compare timings are marked `serial` and run
first, alone, so that no other test's load moves their figures. Both phases always run; the
exit status is the worse of the two.

Usage: scripts/suite.py [WORKERS] [-- extra pytest arguments]
WORKERS (or $SUBRUN_TEST_WORKERS) defaults to 0, one process: with 3 workers the suite takes
about 28 min instead of 42, but two lab tests (a cancelled deployment's 15-s stop, a killed
tuning probe's reattachment) have failed under the workers' load and must hold first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / ".lab" / "reports"
SLOWEST = 25


def phases(workers: int) -> list[tuple[str, list[str]]]:
    """Each phase's name and selection; the second in workers, or in one process with 0."""
    rest = ["-m", "not serial"]
    if workers:
        rest += ["--dist", "loadgroup", "-n", str(workers)]
    return [("serial", ["-m", "serial"]), ("rest", rest)]


def durations(report: Path) -> list[tuple[float, str]]:
    """(seconds, test id) of every test case in a JUnit report pytest wrote."""
    if not report.exists():
        return []
    cases = ET.parse(report).getroot().iter("testcase")
    return [(float(c.get("time", 0)), f"{c.get('classname', '')}::{c.get('name', '')}")
            for c in cases]


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    head = argv[:argv.index("--")] if "--" in argv else argv
    workers = int(head[0] if head else os.environ.get("SUBRUN_TEST_WORKERS", "0"))
    pytest = str(Path(sys.executable).parent / "pytest")
    REPORTS.mkdir(parents=True, exist_ok=True)
    worst = 0
    timings: list[tuple[float, str]] = []
    for name, args in phases(workers):
        report = REPORTS / f"{name}.xml"
        report.unlink(missing_ok=True)
        command = [pytest, *args,
                   "-o", "addopts=-ra --strict-markers", f"--junitxml={report}", *extra]
        print(f"\n=== {name} phase: {' '.join(command[1:])}", flush=True)
        status = subprocess.run(command, cwd=ROOT, check=False).returncode
        # 5: no test selected (a filter in `extra` left this phase empty), not a failure
        worst = max(worst, 0 if status == 5 else status)
        timings += durations(report)
    print(f"\n=== {SLOWEST} slowest tests of both phases")
    for seconds, test in sorted(timings, reverse=True)[:SLOWEST]:
        print(f"{seconds:8.1f}s  {test}")
    print(f"\n{len(timings)} tests in {sum(t for t, _ in timings):.0f} s of test time; "
          f"exit status {worst}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
