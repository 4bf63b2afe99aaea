"""Tracking power (`power: track`): subrun's own daemon around an ordinary run.

The power run is `bench.execute.execute` like every other run: detached in the benchmark's
container, reattached, collected before cleanup, judged and re-run within the bound. Its
container runs the LoadGen command twice, ranging then (after a settle pause) testing, keeping
the ranging logs in `ranging/`. Around the run, the controller holds the analyzer: daemon up
and checked, ranges on auto, load hint busy, one untimed measurement marked with the run's key.
The daemon writes every sample to its `-l` log with that mark, so the judgement reads the
samples of each phase's LoadGen window from there, even after a controller restart. Ranges stay
on auto in both phases; the results are for tracking and never submittable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import power_metric
from bench.execute import ExecuteOptions, execute
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import OUTPUT_DIR, Check, RunRecord, Verdict
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunTarget
from lab.config import Inventory, Mount
from lab.errors import PowerError, SubrunError, is_link_fault
from lab.transport import open_host
from power.client import PtdClient
from power.daemon_logs import SampleFilter
from power.lock import analyzer_lock
from power.measure import PowerRequest, find_analyzer, prepare
from power.official_run import LOCK_WAIT_S
from power.protocol import Sample

LOADGEN_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
MarkedSamples = Callable[[SampleFilter], list[Sample]]  # this run's samples the filter accepts
EDGE_S = 2.0  # samples this close around a phase's LoadGen window go into its spl.txt


@dataclasses.dataclass(frozen=True)
class TrackWrap:
    """Two LoadGen passes in one container; the phases' samples from the daemon's log."""

    sample_log: MarkedSamples
    mark: str
    settle_s: float
    network: str = "none"
    mounts: tuple[Mount, ...] = ()

    def argv(self, harness: list[str]) -> list[str]:
        """ranging pass, its logs kept in ranging/, a pause, then the testing pass."""
        keep = " ".join(f"{OUTPUT_DIR}/{name}" for name in LOADGEN_FILES)
        script = (f'"$@" || exit $?; mkdir -p ranging && cp {keep} ranging/ && '
                  f'sleep {self.settle_s:g} && exec "$@"')
        return ["sh", "-c", script, "sh", *harness]

    def judge(self, store: RunStore, record: RunRecord, verdict: Verdict) -> Verdict:
        """The testing run's verdict with its power, and spl.txt of both phases stored."""
        folder = store.path(record.key, record.attempt)
        try:
            windows = [_window(folder / phase) for phase in ("ranging", OUTPUT_DIR)]
            edge = timedelta(seconds=EDGE_S)
            samples = self.sample_log(lambda s: any(
                w.power_begin - edge <= s.time <= w.power_end + edge for w in windows))
            metrics = place_phases(folder, samples, store, record, self.mark)
        except (SubrunError, OSError) as e:
            return verdict.model_copy(update={
                "passed": False, "submittable": False,
                "checks": [*verdict.checks, Check(name="power", ok=False, detail=str(e))],
                "reason": "; ".join(x for x in (verdict.reason, str(e)) if x)})
        check = Check(name="power", ok=True, detail=(
            f"{metrics['power_w']:.2f} W over the testing window; measured by subrun's daemon: "
            "tracking only, not submittable"))
        return verdict.model_copy(update={"checks": [*verdict.checks, check],
                                          "metrics": {**verdict.metrics, **metrics},
                                          "submittable": False})


def place_phases(folder: Path, samples: list[Sample], store: RunStore, record: RunRecord,
                 mark: str) -> dict[str, float]:
    """ranging/spl.txt and run_1/{logs, spl.txt} into the attempt; the power metrics."""
    metrics: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="subrun-track-") as tmp:
        for phase, logs in (("ranging", folder / "ranging"), ("run_1", folder / OUTPUT_DIR)):
            detail = logs / LOADGEN_FILES[0]
            window = _window(logs)
            edge = timedelta(seconds=EDGE_S)
            inside = [s for s in samples
                      if window.power_begin - edge <= s.time <= window.power_end + edge]
            out = Path(tmp) / phase
            out.mkdir()
            (out / "spl.txt").write_text("".join(f"{s.log_line(f'{mark}_{phase}')}\n"
                                                 for s in inside) + "\n")
            if phase == "run_1":
                for name in LOADGEN_FILES:
                    shutil.copyfile(logs / name, out / name)
            measured = power_metric.compute_metric(inside, window, str(detail))
            if phase == "ranging":
                metrics["ranging_power_w"] = measured.avg_power_w
            else:
                metrics["power_w"] = measured.avg_power_w
                if measured.energy_per_query_mj is not None:
                    metrics["energy_per_query_mj"] = measured.energy_per_query_mj
        store.add_files(record.key, record.attempt, Path(tmp))
    return metrics


def execute_track(target: RunTarget, planned: PlannedRun, store: RunStore, rules: RoundRules,
                  inventory: Inventory, analyzer: str, *, settle_s: float = 10.0,
                  options: ExecuteOptions | None = None,
                  lock_dir: Path | None = None) -> RunRecord:
    """Bring a tracking power run to its final record under the analyzer."""
    spec = planned.spec
    latest = store.latest(spec.key)
    if passed(latest):
        return latest
    mark = f"subrun-{spec.key[:16]}"
    config = find_analyzer(inventory, analyzer)
    host_config = inventory.host(config.host)
    with contextlib.ExitStack() as stack:
        try:
            sample_log = stack.enter_context(_measuring(target, inventory, analyzer, mark,
                                                        host_config.name, lock_dir))
        except PowerError as e:
            record = store.start_attempt(spec)
            return store.update(record.key, record.attempt, state="failed", error=str(e),
                                finished_at=datetime.now(UTC))
        wrap = TrackWrap(sample_log, mark, settle_s)
        return execute(dataclasses.replace(target, wrap=wrap), planned, store, rules,
                       options=options)
    raise AssertionError("unreachable")  # the ExitStack does not swallow exceptions


@contextlib.contextmanager
def _measuring(target: RunTarget, inventory: Inventory, analyzer: str, mark: str,
               daemon_host_name: str, lock_dir: Path | None) -> Iterator[MarkedSamples]:
    """Lock, daemon up and checked, auto ranges, busy load, Go; Stop and idle at the end."""
    host = target.host if target.host.name == daemon_host_name \
        else open_host(inventory.host(daemon_host_name))
    try:
        with analyzer_lock(find_analyzer(inventory, analyzer).name, mark, lock_dir=lock_dir,
                           timeout_s=LOCK_WAIT_S):
            request = PowerRequest(analyzer=analyzer, label=mark, out_dir=Path("."))
            endpoint, report = prepare(request, sut=target.host, daemon_host=host,
                                       inventory=inventory)
            report.raise_for_failure(mark)
            assert endpoint is not None
            with PtdClient(endpoint.address, endpoint.port, token=endpoint.token) as client:
                identity = client.connect()
                client.set_range("V", "Auto")
                client.set_range("A", "Auto")
                if identity.is_subrun:
                    client.set_load(True)
                with contextlib.suppress(PowerError):
                    client.stop()  # one left running by a run interrupted before
                client.go(1000, mark)
                keep = False
                try:
                    yield lambda keep: endpoint.samples(mark, keep)
                except SubrunError as e:
                    keep = is_link_fault(e)  # the run goes on in its container: keep measuring
                    raise
                finally:
                    with contextlib.suppress(PowerError):
                        if not keep:
                            client.stop()
                        if identity.is_subrun and not keep:
                            client.set_load(False)
    finally:
        if host is not target.host:
            host.close()


def _window(logs: Path) -> power_metric.LoadgenWindow:
    """LoadGen's power window of the phase whose logs are in the folder logs."""
    detail = logs / LOADGEN_FILES[0]
    return power_metric.read_window(detail)
