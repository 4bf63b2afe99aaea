#!/usr/bin/env python3
"""The whole test suite in three parts, then the 25 slowest tests of all of them.

1. `serial`: the tests that compare timings (compliance's +-10 %, tuning's probes, a 15-s
   cancellation), with no other lab test beside them, so no other test's load moves their figures.
2. `hostless` (every test that needs no lab host) and `lint` (ruff, mypy), at the same time as
   the first part, in processes pinned to the cores the lab's pinned host leaves to the
   controller, so that h2's core stays the timing tests'. Lint is scheduled only when those
   cores would otherwise idle (SCHED_IDLE); the host-free tests are not, since some of them
   compare LoadGen runs of their own (a submission tree's performance and TEST04 runs within
   10 %), and a process of the idle class is starved for seconds at a time. Their output is
   printed when they end. Without a pinned lab host (nothing to keep them off), they run in
   turn, lint last.
3. `lab`: the other lab tests, in pytest-xdist workers, one test module per group
   (`tests/conftest.py` groups them); most of them wait on LoadGen's fixed durations, Prefect
   servers, SSH links and an analyzer's pauses with a core idle.

Every part always runs; the exit status is the worst of them (`make test` is this script).

Usage: scripts/suite.py [WORKERS] [-- extra pytest arguments]
WORKERS (or $SUBRUN_TEST_WORKERS) for the third part defaults to 3; 0 runs it in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REPORTS = ROOT / ".lab" / "reports"
SLOWEST = 25
DEFAULT_WORKERS = 3


@dataclass
class Part:
    """One pytest session of the suite: its mark selection and how its process starts."""

    name: str
    args: list[str]  # pytest's arguments, or with lint=True the shell command
    cores: tuple[int, ...] = ()  # the cores it is pinned to (() for every core)
    log: Path | None = None  # where its output goes while another part prints (None: here)
    idle: bool = False  # scheduled only when its cores would otherwise idle (SCHED_IDLE)
    lint: bool = False  # ruff and mypy, not pytest
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def command(self, pytest: str, extra: list[str]) -> list[str]:
        if self.lint:
            return self.args
        return [pytest, *self.args, "-o", "addopts=-ra --strict-markers",
                f"--junitxml={self.report}", *extra]

    @property
    def report(self) -> Path:
        return REPORTS / f"{self.name}.xml"

    def start(self, pytest: str, extra: list[str]) -> None:
        self.report.unlink(missing_ok=True)
        command = self.command(pytest, extra)
        when = ", when idle" if self.idle else ""
        where = f" (on cores {','.join(map(str, self.cores))}{when}; output: {self.log})" \
            if self.cores else ""
        print(f"\n=== {self.name}: {' '.join(command[1:])}{where}", flush=True)
        out = self.log.open("wb") if self.log else None
        try:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out,
                                            stderr=subprocess.STDOUT if out else None,
                                            preexec_fn=_start_on(self.cores, self.idle)
                                            if self.cores else None)
        finally:
            if out:
                out.close()

    def wait(self) -> int:
        """Its exit status; 5 (no test selected, a filter left it empty) counts as 0."""
        assert self.process is not None
        status = self.process.wait()
        if self.log:
            print(f"\n=== {self.name} (run beside the serial part, exit status {status}): "
                  "output", flush=True)
            sys.stdout.write(self.log.read_text(errors="replace"))
            sys.stdout.flush()
        return 0 if status == 5 else status


def _start_on(cores: tuple[int, ...], idle: bool) -> Callable[[], None]:
    """A child's start: on cores and, if idle, at the idle scheduling class (the lowest nice
    where that class is missing)."""
    def start() -> None:
        os.sched_setaffinity(0, cores)
        if not idle:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            os.nice(19)
    return start


def cores_off_pinned() -> tuple[int, ...]:
    """The cores no lab host pins its runs to, when some host pins some: () when none does
    (or there is no lab), so there is nothing to keep the host-free tests off."""
    from lab.config import load_inventory
    from lab.cores import resolve, setting_of
    from lab.errors import SubrunError

    path = ROOT / ".lab" / "hosts.yaml"
    count = os.cpu_count() or 1
    try:
        inventory = load_inventory(path)
        pinned = {core for host in inventory.hosts
                  for core in resolve(setting_of(host)[0], count, host=host.name)}
    except (OSError, SubrunError):
        return ()
    rest = tuple(sorted(set(range(count)) - pinned))
    return rest if pinned and rest else ()


def parts(workers: int, beside: tuple[int, ...], bin_dir: Path) -> list[list[Part]]:
    """The parts in order; the parts of one inner list run at the same time."""
    lab = ["-m", "lab and not serial"]
    if workers:
        lab += ["--dist", "loadgroup", "-n", str(workers)]
    serial = Part("serial", ["-m", "serial"])
    hostless = Part("hostless", ["-m", "not lab and not serial"], cores=beside,
                    log=REPORTS / "hostless.log" if beside else None)
    lint = Part("lint", ["/bin/sh", "-c", f"{bin_dir}/ruff check . && {bin_dir}/mypy"],
                cores=beside, log=REPORTS / "lint.log" if beside else None, idle=True,
                lint=True)
    if beside:
        return [[serial, hostless, lint], [Part("lab", lab)]]
    return [[serial], [hostless], [Part("lab", lab)], [lint]]


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
    workers = int(head[0] if head else os.environ.get("SUBRUN_TEST_WORKERS", DEFAULT_WORKERS))
    bin_dir = Path(sys.executable).parent
    pytest = str(bin_dir / "pytest")
    REPORTS.mkdir(parents=True, exist_ok=True)
    worst = 0
    timings: list[tuple[float, str]] = []
    for together in parts(workers, cores_off_pinned(), bin_dir):
        for part in together:
            part.start(pytest, extra)
        for part in together:
            worst = max(worst, part.wait())
            timings += durations(part.report)
    print(f"\n=== {SLOWEST} slowest tests of all parts")
    for seconds, test in sorted(timings, reverse=True)[:SLOWEST]:
        print(f"{seconds:8.1f}s  {test}")
    print(f"\n{len(timings)} tests in {sum(t for t, _ in timings):.0f} s of test time; "
          f"exit status {worst}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
