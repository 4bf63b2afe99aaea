#!/usr/bin/env python3
"""The whole test suite in parts, some side by side, then the 25 slowest tests of all of them.

1. `serial`: the tests that compare timings (compliance's +-10 %, tuning's probes), with no
   other lab test on h2's pinned core, so no other test's load moves their figures.
2. Beside it, in processes pinned to the cores the lab's pinned host leaves to the controller
   (so that h2's core stays the timing tests'), three lanes:
   - `hostless` (the tests that need no lab host), then `lab-beside` (the lab tests marked
     `beside`, which compare no timing, in a lab lane whose SSH hosts run their containers on
     those cores too: `tests/conftest.py` lab_dir);
   - `hostless-waiting`: the host-free modules marked `waits`, which mostly wait (power-dev's
     fixed pauses, a lease's time bounds) and so leave those cores to the first lane;
   - `lint` (ruff, mypy), scheduled only when those cores would otherwise idle (SCHED_IDLE).
     The host-free tests are not, since some of them compare LoadGen runs of their own (a
     submission tree's performance and TEST04 runs within 10 %), and a process of the idle
     class is starved for seconds at a time.
3. `lab`: the other lab tests, in pytest-xdist workers, started as soon as the serial part
   ends, their SSH hosts' containers on every core (SUBRUN_LANE_CORES): no timing test is left
   to keep h2's core for. Each worker takes whole modules, longest first (`--dist loadfile`, in
   the order of `tests/conftest.py` LONGEST_FIRST), so a module's fixtures are made once; most
   of them wait on LoadGen's fixed durations, Prefect servers, SSH links and an analyzer's
   pauses with a core idle.

The output of the parts beside another is printed when the suite ends. Without a pinned lab
host (nothing to keep them off), the host-free tests follow the serial part, and the lab part
(the `beside` tests with it) and lint follow them. Every part always runs; the exit status is
the worst of them (`make test` is this script).

Usage: scripts/suite.py [WORKERS] [-- extra pytest arguments]
WORKERS (or $SUBRUN_TEST_WORKERS) for the lab part defaults to 3; 0 runs it in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
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
    env: dict[str, str] = field(default_factory=dict)  # set for its process
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
                                            env={**os.environ, **self.env},
                                            preexec_fn=_start_on(self.cores, self.idle)
                                            if self.cores else None)
        finally:
            if out:
                out.close()

    def wait(self) -> int:
        """Its exit status; 5 (no test selected, a filter left it empty) counts as 0."""
        assert self.process is not None
        status = self.process.wait()
        return 0 if status == 5 else status

    def show(self, status: int) -> None:
        """Its output, when it went to a log while another part printed."""
        if self.log:
            print(f"\n=== {self.name} (run beside another part, exit status {status}): "
                  "output", flush=True)
            sys.stdout.write(self.log.read_text(errors="replace"))
            sys.stdout.flush()


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


@dataclass
class Plan:
    """Lanes that start together, each running its parts in turn; `then` starts its parts
    (each a lane of its own) as soon as the first lane ends."""

    lanes: list[list[Part]]
    then: list[Part]


def plan(workers: int, beside: tuple[int, ...], bin_dir: Path) -> Plan:
    """The parts and their order: beside the serial part on the controller's cores when a lab
    host is pinned (`beside`), else in turn."""
    spread = (["--dist", "loadfile", "--no-loadscope-reorder", "-n", str(workers)]
              if workers else [])
    serial = Part("serial", ["-m", "serial"])

    def logged(name: str) -> Path | None:
        return REPORTS / f"{name}.log" if beside else None

    hostless = Part("hostless", ["-m", "not lab and not serial and not waits"], cores=beside,
                    log=logged("hostless"))
    waiting = Part("hostless-waiting", ["-m", "not lab and not serial and waits"], cores=beside,
                   log=logged("hostless-waiting"))
    lint = Part("lint", ["/bin/sh", "-c", f"{bin_dir}/ruff check . && {bin_dir}/mypy"],
                cores=beside, log=REPORTS / "lint.log", idle=True, lint=True)
    if not beside:
        return Plan([[serial, hostless, waiting]],
                    [Part("lab", ["-m", "lab and not serial", *spread]), lint])
    lane_beside = Part("lab-beside", ["-m", "lab and beside and not serial"], cores=beside,
                       log=logged("lab-beside"),
                       env={"SUBRUN_TEST_LANE": "beside",
                            "SUBRUN_LANE_CORES": ",".join(map(str, beside))})
    # the timing tests have ended: h2's runs may use every core again (pinned, the lab part's
    # containers queued on h2's core while the controller's stood a quarter idle)
    every = ",".join(map(str, range(os.cpu_count() or 1)))
    lab = Part("lab", ["-m", "lab and not serial and not beside", *spread],
               env={"SUBRUN_LANE_CORES": every})
    return Plan([[serial], [hostless, lane_beside], [waiting], [lint]], [lab])


def run_lane(parts: list[Part], pytest: str, extra: list[str],
             statuses: dict[str, int]) -> None:
    """Its parts in turn, each one's exit status noted by name."""
    for part in parts:
        part.start(pytest, extra)
        statuses[part.name] = part.wait()


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
    order = plan(workers, cores_off_pinned(), bin_dir)
    statuses: dict[str, int] = {}

    def started(parts: list[Part]) -> threading.Thread:
        thread = threading.Thread(target=run_lane, args=(parts, pytest, extra, statuses))
        thread.start()
        return thread

    first, *others = [started(lane) for lane in order.lanes]
    first.join()
    others += [started([part]) for part in order.then]
    for thread in others:
        thread.join()
    every = [part for lane in order.lanes for part in lane] + order.then
    worst, timings = 0, []
    for part in every:
        status = statuses.get(part.name, 1)
        part.show(status)
        worst = max(worst, status)
        timings += durations(part.report)
    print(f"\n=== {SLOWEST} slowest tests of all parts")
    for seconds, test in sorted(timings, reverse=True)[:SLOWEST]:
        print(f"{seconds:8.1f}s  {test}")
    print(f"\n{len(timings)} tests in {sum(t for t, _ in timings):.0f} s of test time; "
          f"exit status {worst}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
