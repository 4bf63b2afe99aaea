"""A power run on subrun's own path: a ranging run, then a testing run, under one analyzer.

Ranging runs the workload with automatic ranges; testing sets the voltage range to the
ranging maximum and the current range to 1.1 x the ranging maximum (the daemon rounds both up
to real ranges) and runs the workload again. The session writes, under `out_dir`:

    ranging/{mlperf_log_detail.txt, mlperf_log_summary.txt, spl.txt}
    run_1/{mlperf_log_detail.txt, mlperf_log_summary.txt, spl.txt}
    power/{subrun_session.json, power_trace.png[, ptd_logs.txt]}

`power/` holds only what this path can honestly produce: no client.json or server.json, which
only the official power-dev client and server write. These results are never submittable.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from bench import power_metric
from lab.errors import PowerError, SubrunError
from power import protocol
from power.client import Identity, PtdClient
from power.phase import PhasePlan, SampleLogReader, Workload, measure_phase
from power.plot import PhaseTrace, plot_power
from power.protocol import Ranges, Sample

Label = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
AMPS_MARGIN = 1.1  # power-dev's testing current range: 1.1 x the ranging maximum
ConsoleCopier = Callable[[Path], None]  # writes the daemon's console into a local file


class PowerSettings(BaseModel):
    """Where the daemon is, where the results go, and how the phases are paced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    analyzer: str
    address: str
    port: int = Field(ge=1, le=65535)
    label: Label
    out_dir: Path
    settle_s: float = Field(default=10.0, ge=0)  # idle time after ranges are set and before Stop
    interval_ms: int = Field(default=1000, ge=100, le=60000)
    poll_s: float = Field(default=1.0, gt=0)
    short_ranging: bool = False  # nightly tracking: a shorter ranging run
    timeout_s: float = Field(default=30.0, gt=0)
    token: str | None = Field(default=None, repr=False)  # for a daemon beyond loopback


class PowerResult(BaseModel):
    """What a power run measured, with why it is not submittable."""

    model_config = ConfigDict(frozen=True)

    session: str
    out_dir: Path
    scenario: str
    avg_power_w: float
    energy_per_query_mj: float | None
    duration_s: float
    samples_in_window: int
    ranging_avg_power_w: float | None
    testing_delta: float | None  # testing vs ranging average; the checker fails below -5 %
    testing_volts: str
    testing_amps: str
    identity: str
    plot: Path
    submittable: bool = False
    notes: list[str] = Field(default_factory=list)

    @property
    def headline(self) -> str:
        if self.energy_per_query_mj is not None:
            return f"{self.energy_per_query_mj:.3f} mJ/query"
        return f"{self.avg_power_w:.2f} W"


def run_power(settings: PowerSettings, workload: Workload,
              console: ConsoleCopier | None = None,
              sample_log: SampleLogReader | None = None) -> PowerResult:
    """Ranging then testing under the analyzer; raises PowerError when a phase fails.

    console copies the daemon's console into a local file (its lines since the session began
    are kept as power/ptd_logs.txt); sample_log reads the daemon's `-l` log, from which samples
    are recovered if the daemon stops mid-phase.
    """
    started = datetime.now(UTC)
    session = f"{started:%Y-%m-%d_%H-%M-%S}_{settings.label}"
    out = settings.out_dir
    client = PtdClient(settings.address, settings.port, settings.timeout_s,
                       token=settings.token)
    identity = client.connect()
    try:
        initial = client.read_ranges()
        try:
            ranging = measure_phase(client, identity, _plan(settings, session, "ranging"),
                                    workload, sample_log)
            volts, amps = power_metric.ranging_maxima(ranging, f"session {session}")
            testing_ranges = (f"{volts}", f"{amps * AMPS_MARGIN}")
            testing = measure_phase(client, identity,
                                    _plan(settings, session, "testing", testing_ranges),
                                    workload, sample_log)
        finally:
            _restore(client, initial)
    finally:
        _write_log(out, session, identity, client, console, started)
        client.close()
    return _result(settings, session, identity, ranging, testing, testing_ranges)


def _plan(settings: PowerSettings, session: str, name: str,
          ranges: tuple[str, str] = (protocol.AUTO, protocol.AUTO)) -> PhasePlan:
    ranging = name == "ranging"
    return PhasePlan(
        name="ranging" if ranging else "testing",
        mark=f"{session}_{name}",
        phase_dir=settings.out_dir / ("ranging" if ranging else "run_1"),
        loadgen_dir=settings.out_dir / "loadgen" / name,
        volts=ranges[0], amps=ranges[1], settle_s=settings.settle_s,
        interval_ms=settings.interval_ms, poll_s=settings.poll_s,
        short=ranging and settings.short_ranging)


def _restore(client: PtdClient, initial: Ranges) -> None:
    """Put the ranges back as the session found them (best effort: the daemon may be gone)."""
    for quantity in ("V", "A"):
        try:
            client.command(f"SR,{quantity},{initial.initial(quantity)}")
        except PowerError:
            return


def _result(settings: PowerSettings, session: str, identity: Identity,
            ranging: list[Sample], testing: list[Sample],
            testing_ranges: tuple[str, str]) -> PowerResult:
    out = settings.out_dir
    window = power_metric.read_window(out / "run_1" / "mlperf_log_detail.txt")
    result = power_metric.compute_metric(testing, window, str(out / "run_1" / "spl.txt"))
    ranging_window = power_metric.read_window(out / "ranging" / "mlperf_log_detail.txt")
    ranging_w = power_metric.average_w(ranging, ranging_window)
    delta = power_metric.testing_drop(ranging_w, result.avg_power_w) if ranging_w else None
    simulated = " (simulated)" if "simulated=yes" in identity.reply else ""
    notes = [f"Measured by subrun's power daemon, not SPEC PTDaemon, on a {identity.model}"
             f"{simulated}." if identity.is_subrun else
             f"Measured by {identity.model}, daemon version {identity.version}.",
             "Not submittable: official power results need SPEC PTDaemon driven through the "
             "unmodified power-dev client and server (power.official)."]
    if settings.short_ranging:
        notes.append("Shortened ranging run (nightly tracking).")
    if delta is not None and delta < power_metric.TESTING_DROP_LIMIT:
        notes.append(f"Testing power is {-100 * delta:.1f} % below ranging power; the "
                     "checker fails a drop of more than 5 %.")
    plot = plot_power([PhaseTrace("ranging", ranging, ranging_window, ranging_w),
                       PhaseTrace("testing", testing, window, result.avg_power_w)],
                      out / "power" / "power_trace.png",
                      f"{session} ({settings.analyzer}): {result.headline}")
    power = PowerResult(
        session=session, out_dir=out, scenario=window.scenario, avg_power_w=result.avg_power_w,
        energy_per_query_mj=result.energy_per_query_mj, duration_s=result.duration_s,
        samples_in_window=result.samples_in_window, ranging_avg_power_w=ranging_w,
        testing_delta=delta, testing_volts=testing_ranges[0], testing_amps=testing_ranges[1],
        identity=identity.reply, plot=plot, notes=notes)
    _merge_json(out, {"result": power.model_dump(mode="json")})
    return power


def _write_log(out: Path, session: str, identity: Identity, client: PtdClient,
               console: ConsoleCopier | None, started: datetime) -> None:
    """power/subrun_session.json (exchanges with the daemon) and the daemon's console lines."""
    _merge_json(out, {"session": session, "identity": identity.reply,
                      "submittable": False, "started": started.isoformat(),
                      "ptd_messages": [{"cmd": c, "reply": r} for c, r in client.messages]})
    if console is None:
        return
    whole = out / "power" / "ptd_console.tmp"
    try:
        console(whole)
        with whole.open(errors="replace") as lines, \
                (out / "power" / "ptd_logs.txt").open("w") as kept:
            kept.writelines(line for line in lines if _stamped_after(line, started))
    except (PowerError, SubrunError, OSError):
        return  # the console is a record, not a result: the measurement stands without it
    finally:
        whole.unlink(missing_ok=True)


def _stamped_after(line: str, started: datetime) -> bool:
    try:
        return protocol.parse_time(line[:23]) >= started.replace(microsecond=0)
    except ValueError:
        return False


def _merge_json(out: Path, update: dict[str, object]) -> None:
    path = out / "power" / "subrun_session.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(update)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
