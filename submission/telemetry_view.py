"""The report's telemetry: each run's host trace as a figure, and the runs it flagged.

The trace of a run (`telemetry.jsonl`, from `bench.sampler`) is read from the run store with
`bench.trace`, which bounds and checks it: it came from the target. The flags and the summary
are the attempt's record (`run.json`: `telemetry`); a flagged run is a warning, not a failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.sampler import TRACE
from bench.trace import read_trace
from bench.trace_judge import points
from submission.inputs import StoredRun, latest_attempts
from submission.plots import HostTrace, host_traces

MAX_PLOTTED = 40  # runs in the figure; the section lists every flagged one


def figures(runs: Sequence[StoredRun]) -> dict[str, bytes]:
    """`telemetry.png`: the host trace of each run's latest attempt that has one."""
    traces = []
    for run in latest_attempts(runs, passing_only=False):
        path = run.folder / TRACE
        if TRACE not in run.record.files or not path.is_file():
            continue
        pts = points(read_trace(path))
        if not pts:
            continue
        start = pts[0].t
        traces.append(HostTrace(
            label=f"{_label(run)}{_flags(run)}",
            seconds=[(p.t - start).total_seconds() for p in pts],
            run_pct=[p.run_pct or 0.0 for p in pts],
            other_pct=[p.other_pct if p.other_pct is not None else p.cpu_pct for p in pts],
            mhz=[p.mhz for p in pts], temp_c=[p.temp_c for p in pts]))
    png = host_traces(traces[:MAX_PLOTTED], "Host telemetry during the runs")
    return {"telemetry.png": png} if png else {}


def section(runs: Sequence[StoredRun]) -> list[str]:
    """The runs whose host throttled or was contended, with what their trace says."""
    sampled = [r for r in runs if r.record.telemetry is not None]
    if not sampled:
        return []
    out = ["## Telemetry", "", f"{len(sampled)} attempt(s) sampled on their host at 1 Hz "
           "(CPU of the run and of other processes, frequency, temperature, memory, GPUs)."]
    flagged = [r for r in sampled if r.record.telemetry and r.record.telemetry.flagged]
    if not flagged:
        return [*out, "No run was throttled or contended.", ""]
    out += ["", "| run | attempt | flags | CPU mean/max % | others mean % | min MHz | max C |",
            "|---|---|---|---|---|---|---|"]
    for run in flagged:
        s = run.record.telemetry
        assert s is not None
        out.append(f"| {_label(run)} | {run.record.attempt} | {_flags(run).strip(' []')} | "
                   f"{_n(s.cpu_mean_pct)}/{_n(s.cpu_max_pct)} | {_n(s.other_mean_pct)} | "
                   f"{_n(s.freq_min_mhz)} | {_n(s.temp_max_c)} |")
    reasons = [f"- {_label(r)} attempt {r.record.attempt}: {reason}" for r in flagged
               for reason in (r.record.telemetry.reasons if r.record.telemetry else [])]
    return [*out, "", "A flagged run is a warning: its result may be lower than the host can "
            "do. Re-run it on a quiet, cool host.", "", *reasons, ""]


def _label(run: StoredRun) -> str:
    return run.spec.label


def _flags(run: StoredRun) -> str:
    s = run.record.telemetry
    names = [n for n, on in (("throttled", s and s.throttled), ("contended", s and s.contended))
             if on]
    return f" [{', '.join(names)}]" if names else ""


def _n(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"
