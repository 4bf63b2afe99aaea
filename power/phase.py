"""One measured phase of a power run: ranges, Go, the workload, Stop, and every sample kept.

While the workload runs, a monitor thread fetches the unread samples every few seconds and
appends them to the phase's spl.txt, so that if the analyzer or the daemon stops mid-run the
samples measured until then are already on disk beside the run.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench import power_metric
from lab.errors import PowerError, SubrunError
from power.client import Identity, PtdClient
from power.protocol import Sample

PhaseName = Literal["ranging", "testing"]
LOADGEN_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
KEEPALIVE_S = 20.0  # well under the daemon's idle timeout (60 s by default)


@dataclass(frozen=True)
class WorkloadCall:
    """One LoadGen performance run the session asks for."""

    phase: PhaseName
    out_dir: Path  # LoadGen writes its logs here
    short: bool  # a shortened ranging run (nightly tracking, not submittable)


Workload = Callable[[WorkloadCall], None]
# (mark, keep) -> the samples of the daemon's `-l` log with that mark which keep accepts
SampleLogReader = Callable[[str, Callable[[Sample], bool]], list[Sample]]


@dataclass(frozen=True)
class PhasePlan:
    """How to measure one phase."""

    name: PhaseName
    mark: str
    phase_dir: Path  # ranging/ or run_1/
    loadgen_dir: Path
    volts: str  # SR,V argument: Auto or a value
    amps: str  # SR,A argument
    settle_s: float
    interval_ms: int
    poll_s: float
    short: bool = False


class SampleMonitor:
    """Fetches unread samples while the workload runs and appends them to spl.txt."""

    def __init__(self, client: PtdClient, spl_path: Path, mark: str, poll_s: float) -> None:
        self.client = client
        self.spl_path = spl_path
        self.mark = mark
        self.poll_s = poll_s
        self.samples: list[Sample] = []
        self.error: PowerError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sample-monitor", daemon=True)
        spl_path.parent.mkdir(parents=True, exist_ok=True)
        spl_path.write_text("")

    def start(self) -> SampleMonitor:
        self._thread.start()
        return self

    def finish(self) -> None:
        """Stop polling (the caller fetches the last samples itself)."""
        self._stop.set()
        self._thread.join(timeout=self.client.timeout_s + 5)

    def fetch(self) -> None:
        """Fetch the unread samples now and keep them."""
        self.keep(self.client.read_samples())

    def keep(self, samples: list[Sample]) -> None:
        """Append samples to memory and to spl.txt."""
        if not samples:
            return
        self.samples.extend(samples)
        with self.spl_path.open("a") as f:
            f.writelines(s.log_line(self.mark) + "\n" for s in samples)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.fetch()
            except PowerError as e:
                self.error = e
                return


def measure_phase(client: PtdClient, identity: Identity, plan: PhasePlan,
                  workload: Workload, sample_log: SampleLogReader | None = None) -> list[Sample]:
    """Run one phase under the analyzer; returns its samples or raises PowerError.

    On failure, samples the monitor had not fetched yet are recovered from the daemon's `-l`
    log when sample_log can read it.
    """
    client.set_range("V", plan.volts)
    client.set_range("A", plan.amps)
    settle(client, plan.settle_s)
    spl = plan.phase_dir / "spl.txt"
    monitor = SampleMonitor(client, spl, plan.mark, plan.poll_s)
    started = time.time()
    client.go(plan.interval_ms, plan.mark)
    monitor.start()
    workload_error: BaseException | None = None
    try:
        _run_workload(client, identity, plan, workload)
    except BaseException as e:
        workload_error = e
    time.sleep(plan.settle_s if workload_error is None else 0)
    monitor.finish()
    try:
        client.stop()
    except PowerError as e:
        _salvage(monitor, sample_log)
        raise _failed(plan, monitor, e) from e
    finally:
        if workload_error is not None:
            _salvage(monitor, sample_log)
    if workload_error is not None:
        raise workload_error
    monitor.fetch()
    with spl.open("a") as f:
        f.write("\n")  # power-dev's spl.txt ends with one blank line
    copy_loadgen_logs(plan.loadgen_dir, plan.phase_dir, started)
    return monitor.samples


def settle(client: PtdClient, seconds: float) -> None:
    """Wait before Go, reading the analyzer every KEEPALIVE_S: the daemon drops a client that
    is silent without a measurement running, and a long settle is not idling."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, KEEPALIVE_S))
        if deadline - time.monotonic() > 0:
            client.command("Watts")


def _run_workload(client: PtdClient, identity: Identity, plan: PhasePlan,
                  workload: Workload) -> None:
    plan.loadgen_dir.mkdir(parents=True, exist_ok=True)
    if identity.is_subrun:
        client.set_load(True)
    try:
        workload(WorkloadCall(plan.name, plan.loadgen_dir, plan.short))
    finally:
        if identity.is_subrun:
            # the stop that follows reports a lost daemon with more context
            with contextlib.suppress(PowerError):
                client.set_load(False)


def _salvage(monitor: SampleMonitor, sample_log: SampleLogReader | None) -> None:
    # the daemon may be gone; what the monitor fetched before is on disk already
    with contextlib.suppress(PowerError):
        monitor.fetch()
    if sample_log is None:
        return
    last = monitor.samples[-1].time if monitor.samples else None
    try:
        missed = sample_log(monitor.mark, lambda s: last is None or s.time > last)
    except SubrunError:
        return  # the daemon's host is unreachable too; keep what we have
    monitor.keep(missed)


def _failed(plan: PhasePlan, monitor: SampleMonitor, error: PowerError) -> PowerError:
    first = f" (first noticed: {monitor.error})" if monitor.error else ""
    return PowerError(
        f"The {plan.name} phase (mark '{plan.mark}') failed: {error}{first} The "
        f"{len(monitor.samples)} samples measured before the failure are kept in "
        f"{monitor.spl_path}. Check the analyzer (cable, power) and its daemon, restart the "
        "daemon if it stopped, then run the power run again; the next run connects afresh.")


def copy_loadgen_logs(loadgen_dir: Path, phase_dir: Path, started: float) -> None:
    """Copy the detail and summary logs of the LoadGen run that began after started."""
    for detail in sorted(loadgen_dir.rglob(LOADGEN_FILES[0])):
        try:
            window = power_metric.read_window(detail)
        except SubrunError:  # not (yet) the log of a finished run: not this phase's
            continue
        if window.power_begin.timestamp() >= started - 1:
            for name in LOADGEN_FILES:
                source = detail.parent / name
                if not source.exists():
                    raise PowerError(f"LoadGen wrote {detail} but no {name} beside it.")
                shutil.copyfile(source, phase_dir / name)
            return
    raise PowerError(f"No LoadGen performance run that started during this phase left a "
                     f"{LOADGEN_FILES[0]} under {loadgen_dir}; the workload must write "
                     "LoadGen's logs into the directory it is given.")
