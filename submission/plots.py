"""The report's figures as PNG bytes: headline metrics per result, latency percentiles, power.

matplotlib runs headless (Agg); each function returns the PNG, or None when there is nothing to
draw, so the report simply leaves the figure out.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first
from matplotlib.figure import Figure


@dataclass(frozen=True)
class PowerTrace:
    """Samples of one power phase and LoadGen's power window, for one result."""

    label: str
    times: Sequence[datetime]
    watts: Sequence[float]
    begin: datetime | None = None
    end: datetime | None = None


def metric_bars(values: Mapping[str, float], unit: str, title: str) -> bytes | None:
    """One horizontal bar per result (e.g. Offline samples/s of every system and model)."""
    if not values:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(values)))
    names = list(values)
    ax.barh(names, [values[n] for n in names], color="#3b7dd8")
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    for i, name in enumerate(names):
        ax.annotate(f"{values[name]:,.4g}", (values[name], i), va="center", fontsize=8,
                    xytext=(3, 0), textcoords="offset points")
    return _png(fig)


def latency_percentiles(curves: Mapping[str, Mapping[float, float]], title: str) -> bytes | None:
    """Latency (ms) against percentile, one line per result."""
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, points in curves.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", markersize=3, label=name)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def power_trace(traces: Sequence[PowerTrace], title: str) -> bytes | None:
    """Watts over time for each phase, LoadGen's power window shaded."""
    traces = [t for t in traces if t.times]
    if not traces:
        return None
    fig, axes = plt.subplots(len(traces), 1, figsize=(7, 2.2 * len(traces)), squeeze=False)
    for ax, trace in zip(axes[:, 0], traces, strict=True):
        start = trace.times[0]
        xs = [(t - start).total_seconds() for t in trace.times]
        ax.plot(xs, trace.watts, color="#c2410c", linewidth=1)
        if trace.begin and trace.end:
            ax.axvspan((trace.begin - start).total_seconds(), (trace.end - start).total_seconds(),
                       color="#fde68a", alpha=0.6, label="LoadGen power window")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_ylabel("W")
        ax.set_title(trace.label, fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the first sample")
    fig.suptitle(title)
    return _png(fig)


def estimate_bars(hosts: Mapping[str, tuple[float, float]], title: str) -> bytes | None:
    """Estimated and actual seconds side by side, one pair of bars per host."""
    if not hosts:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.7 * len(hosts)))
    names = list(hosts)
    ys = range(len(names))
    for offset, which, color, label in ((-0.2, 0, "#9aa5b1", "estimated"),
                                        (0.2, 1, "#3b7dd8", "actual")):
        values = [hosts[n][which] for n in names]
        ax.barh([y + offset for y in ys], values, height=0.38, color=color, label=label)
        for y, value in zip(ys, values, strict=True):
            ax.annotate(f"{value:,.0f} s", (value, y + offset), va="center", fontsize=8,
                        xytext=(3, 0), textcoords="offset points")
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


@dataclass(frozen=True)
class HostTrace:
    """A run's host telemetry (bench.trace points): percent of all cores in use by the run
    and by other processes, mean core MHz and the hottest temperature, per second."""

    label: str
    seconds: Sequence[float]
    run_pct: Sequence[float]
    other_pct: Sequence[float]
    mhz: Sequence[float | None]
    temp_c: Sequence[float | None]


def host_traces(traces: Sequence[HostTrace], title: str) -> bytes | None:
    """CPU of the run and of the others stacked per run, frequency and temperature beside."""
    traces = [t for t in traces if t.seconds]
    if not traces:
        return None
    fig, axes = plt.subplots(len(traces), 1, figsize=(8, 1.9 * len(traces)), squeeze=False)
    for ax, trace in zip(axes[:, 0], traces, strict=True):
        ax.stackplot(trace.seconds, trace.run_pct, trace.other_pct, colors=["#3b7dd8", "#9aa5b1"],
                     labels=["run", "other processes"], alpha=0.8)
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of cores")
        ax.set_title(trace.label, fontsize=9)
        ax.grid(True, alpha=0.3)
        for values, color, unit in ((trace.mhz, "#15803d", "MHz"), (trace.temp_c, "#c2410c", "C")):
            points = [(s, v) for s, v in zip(trace.seconds, values, strict=True) if v is not None]
            if points:
                twin = ax.twinx()
                twin.plot(*zip(*points, strict=True), color=color, linewidth=1)
                twin.set_ylabel(unit, color=color, fontsize=8)
                if unit == "C":
                    twin.spines["right"].set_position(("outward", 40))
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("seconds since the first sample")
    fig.suptitle(title)
    return _png(fig)


@dataclass(frozen=True)
class SearchTrace:
    """A Server tuning search: each probe's target_qps, its latency (ms) and LoadGen's word."""

    label: str
    qps: Sequence[float]
    latency_ms: Sequence[float]
    valid: Sequence[bool]
    chosen: float | None = None
    bound_ms: float | None = None
    confirm: Sequence[bool] = ()  # the probes that confirmed the chosen value (run-long)


def tuning_searches(searches: Sequence[SearchTrace], title: str) -> bytes | None:
    """Latency against the target QPS tried, VALID and INVALID marked, the bound and the
    chosen value drawn, one panel per search."""
    searches = [s for s in searches if s.qps]
    if not searches:
        return None
    fig, axes = plt.subplots(len(searches), 1, figsize=(7, 2.8 * len(searches)), squeeze=False)
    for ax, s in zip(axes[:, 0], searches, strict=True):
        confirm = list(s.confirm) or [False] * len(s.qps)
        for ok, check, marker, color, name in (
                (True, False, "o", "#15803d", "VALID"), (False, False, "x", "#b91c1c", "INVALID"),
                (True, True, "s", "#15803d", "confirmation VALID"),
                (False, True, "X", "#b91c1c", "confirmation INVALID")):
            points = [(q, lat) for q, lat, v, c in zip(s.qps, s.latency_ms, s.valid, confirm,
                                                       strict=True) if v is ok and c is check]
            if points:
                ax.scatter(*zip(*points, strict=True), marker=marker, label=name,
                           **({"facecolors": "none", "edgecolors": color} if check and ok
                              else {"color": color}))
        for i, (q, lat) in enumerate(zip(s.qps, s.latency_ms, strict=True)):
            ax.annotate(str(i + 1), (q, lat), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        if s.bound_ms:
            ax.axhline(s.bound_ms, color="#9aa5b1", linestyle="--", label="latency bound")
        if s.chosen:
            ax.axvline(s.chosen, color="#3b7dd8", label=f"chosen {s.chosen:g}")
        ax.set_yscale("log")
        ax.set_xlabel("target_qps tried")
        ax.set_ylabel("latency (ms)")
        ax.set_title(s.label, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return _png(fig)
