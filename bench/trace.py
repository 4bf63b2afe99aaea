"""Reading a run's telemetry trace (`bench.sampler`'s JSON lines) and judging it: pure.

The trace comes from the target, which is not trusted: it is read only up to `MAX_BYTES`, a line
longer than `MAX_LINE` or that is not the expected shape is skipped and counted, and every
number must be finite. Nothing in it names a path; reading it writes nothing.

Two flags make a warning (never a failure) on the run:
- `throttled`: while the machine was busy, the mean core frequency stayed below
  `THROTTLE_FREQ_SHARE` of the host's maximum for a sustained share of the samples, or a
  temperature reached its zone's limit (the first passive/hot/critical trip point, or hwmon's
  max/crit).
- `contended`: while the machine was saturated, processes outside the run used at least
  `OTHER_SHARE` of its cores for a sustained share of the run: they took CPU the SUT needed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

MAX_BYTES = 16 * 1024 * 1024
MAX_LINE = 64 * 1024
MAX_GAP_S = 5.0  # a longer interval (a sampler restarted on reattachment) gives no deltas
BUSY = 0.5  # share of all cores in use for "busy"
SATURATED = 0.9  # ... for "saturated"
THROTTLE_FREQ_SHARE = 0.7
OTHER_SHARE = 0.2  # of all cores, used outside the run
SUSTAINED = 0.2  # share of the considered intervals
MIN_INTERVALS = 3


class TelemetrySummary(BaseModel):
    """What a run's trace says, kept in its record (`run.json`: `telemetry`)."""

    model_config = ConfigDict(frozen=True)

    samples: int
    duration_s: float
    cpus: int
    cpu_mean_pct: float | None = None  # of all cores
    cpu_max_pct: float | None = None
    run_cpu_mean_pct: float | None = None  # used by the run itself
    other_mean_pct: float | None = None  # used by every other process
    other_max_pct: float | None = None
    contended_share: float | None = None  # of the run's intervals
    freq_min_mhz: float | None = None  # lowest mean core frequency while busy
    freq_max_mhz: float | None = None  # the host's maximum
    temp_max_c: float | None = None
    load_max: float | None = None
    mem_min_available_mb: float | None = None
    gpu_util_max_pct: float | None = None
    gpu_power_max_w: float | None = None
    gpu_temp_max_c: float | None = None
    sampler_cpu_s: float | None = None  # the sampler's own CPU time
    skipped_lines: int = 0
    throttled: bool = False
    contended: bool = False
    reasons: list[str] = Field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.throttled or self.contended


@dataclass
class Sample:
    """One reading, with the header of its sampler in force."""

    t: datetime
    up: float
    cpu: tuple[float, ...]  # /proc/stat jiffies: user nice system idle iowait irq softirq steal
    khz: list[float]
    temp_c: list[float]
    load1: float | None
    mem_kb: tuple[float, float] | None
    run_s: float | None  # cumulative CPU seconds of the run
    ncpu: int = 0  # cores listed in /proc/stat
    gpus: list[dict[str, float]] = field(default_factory=list)


@dataclass
class Trace:
    """A parsed trace: samples in order, what its headers said, what was skipped."""

    samples: list[Sample] = field(default_factory=list)
    max_khz: float | None = None
    limits_c: list[float] = field(default_factory=list)
    sampler_ticks: float = 0.0
    hz: float = 100.0
    skipped: int = 0


@dataclass(frozen=True)
class Point:
    """One interval between two samples: shares of all cores, in percent."""

    t: datetime
    cpu_pct: float
    run_pct: float | None
    other_pct: float | None
    mhz: float | None
    temp_c: float | None


def read_trace(path: Path) -> Trace:
    """Parse the trace at path (at most MAX_BYTES of it; bad lines are skipped and counted)."""
    with Path(path).open("rb") as f:
        data = f.read(MAX_BYTES)
    return parse_trace(data.decode("utf-8", errors="replace").splitlines())


def parse_trace(lines: Iterable[str]) -> Trace:
    """Parse trace lines: header lines (`v`), sample lines (`cpu`), the sampler's end line."""
    trace = Trace()
    header: dict[str, object] | None = None
    for line in lines:
        if not line.strip():
            continue
        item = _json(line)
        if item is None:
            trace.skipped += 1
        elif "v" in item:
            header = item if _header(trace, item) else None
            trace.skipped += header is None
        elif "self_ticks" in item and _num(item["self_ticks"]) is not None:
            trace.sampler_ticks += _num(item["self_ticks"]) or 0.0
        elif header is not None and (sample := _sample(item, header)) is not None:
            trace.samples.append(sample)
        else:
            trace.skipped += 1
    trace.samples.sort(key=lambda s: s.up)
    return trace


def _json(line: str) -> dict[str, object] | None:
    if len(line) > MAX_LINE:
        return None
    try:
        item = json.loads(line)
    except ValueError:
        return None
    return item if isinstance(item, dict) else None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _nums(value: object) -> list[float] | None:
    if not isinstance(value, list):
        return None
    out = [_num(v) for v in value]
    return None if any(v is None for v in out) else [v for v in out if v is not None]


def _header(trace: Trace, item: dict[str, object]) -> bool:
    epoch, up, hz = _num(item.get("epoch")), _num(item.get("up")), _num(item.get("hz"))
    if epoch is None or up is None or not 0 <= epoch < 1e11 or not hz or hz <= 0:
        return False
    trace.hz = hz
    max_khz = _nums(item.get("max_khz")) or []
    if max_khz:
        trace.max_khz = max(max_khz)
    trace.limits_c = [v / 1000 for v in _nums(item.get("limits_mc")) or []]
    return True


def _sample(item: dict[str, object], header: dict[str, object]) -> Sample | None:
    up, cpu = _num(item.get("up")), _nums(item.get("cpu"))
    epoch, up0 = _num(header["epoch"]), _num(header["up"])
    if up is None or cpu is None or len(cpu) < 4 or epoch is None or up0 is None:
        return None
    if not 0 <= up - up0 < 1e7:
        return None
    load = _nums(item.get("load")) or []
    mem = _nums(item.get("mem_kb")) or []
    run = _num(item.get("run"))
    unit = {"us": 1e-6, "ns": 1e-9, "ticks": 1 / float(header["hz"])}.get(  # type: ignore[arg-type]
        str(header.get("run_unit")))
    cores = item.get("cores")
    return Sample(
        t=datetime.fromtimestamp(epoch, UTC) + timedelta(seconds=up - up0), up=up,
        cpu=tuple(cpu[:8]), khz=_nums(item.get("khz")) or [],
        temp_c=[v / 1000 for v in _nums(item.get("temp_mc")) or []],
        load1=load[0] if load else None, mem_kb=(mem[0], mem[1]) if len(mem) == 2 else None,
        run_s=run * unit if run is not None and unit is not None else None,
        gpus=_gpus(item.get("gpu"), str(header.get("gpu", ""))), ncpu=len(cores),
    ) if isinstance(cores, list) and len(cores) <= 4096 else None


def _gpus(value: object, kind: str) -> list[dict[str, float]]:
    """nvidia-smi's `util, sm clock, max sm clock, power, temp` CSV rows; rocm-smi's CSV is
    read by its header's column names."""
    if not isinstance(value, list) or len(value) > 64:
        return []
    rows = [str(v).split(",") for v in value if isinstance(v, str)]
    if kind == "nvidia":
        names = ("util_pct", "mhz", "max_mhz", "power_w", "temp_c")
        return [{n: f for n, f in zip(names, map(_float, row), strict=False) if f is not None}
                for row in rows]
    if kind == "rocm" and len(rows) > 1:
        columns = [c.lower() for c in rows[0]]
        wanted = {"util_pct": "use (%)", "temp_c": "temperature", "power_w": "power (w)",
                  "mhz": "sclk"}
        picks = {n: next((i for i, c in enumerate(columns) if key in c), None)
                 for n, key in wanted.items()}
        return [{n: f for n, i in picks.items() if i is not None and i < len(row)
                 and (f := _float(row[i])) is not None} for row in rows[1:]]
    return []


def _float(text: str) -> float | None:
    try:
        value = float(text.strip().rstrip("Mhz").strip("()"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def points(trace: Trace) -> list[Point]:
    """Per interval: CPU in use, by the run and by the others (percent of all cores), the mean
    core frequency and the hottest temperature."""
    out = []
    for a, b in zip(trace.samples, trace.samples[1:], strict=False):
        dt = b.up - a.up
        delta = [y - x for x, y in zip(a.cpu, b.cpu, strict=False)]
        total = sum(delta)
        if not 0 < dt <= MAX_GAP_S or total <= 0 or any(d < 0 for d in delta):
            continue
        idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
        busy = max(0.0, min(1.0, (total - idle) / total))
        cores = b.ncpu or max(1, round(total / trace.hz / dt))
        run = other = None
        if a.run_s is not None and b.run_s is not None and b.run_s >= a.run_s:
            run = min(1.0, (b.run_s - a.run_s) / dt / cores)
            other = max(0.0, busy - run)
        mhz = sum(b.khz) / len(b.khz) / 1000 if b.khz else None
        out.append(Point(b.t, 100 * busy, None if run is None else 100 * run,
                         None if other is None else 100 * other, mhz,
                         max(b.temp_c) if b.temp_c else None))
    return out


def summarize(trace: Trace) -> TelemetrySummary:
    """The run's numbers and its flags."""
    pts = points(trace)
    samples = trace.samples
    busy = [p for p in pts if p.cpu_pct >= 100 * BUSY]
    with_run = [p for p in pts if p.run_pct is not None and p.other_pct is not None]
    active = [p for p in with_run if (p.run_pct or 0) >= 5.0]
    contended = [p for p in active if p.cpu_pct >= 100 * SATURATED
                 and (p.other_pct or 0) >= 100 * OTHER_SHARE]
    freqs = [p.mhz for p in busy if p.mhz is not None]
    max_mhz = trace.max_khz / 1000 if trace.max_khz else None
    slow = [f for f in freqs if max_mhz and f < THROTTLE_FREQ_SHARE * max_mhz]
    hot = [(s.t, t, lim) for s in samples for t, lim in zip(s.temp_c, trace.limits_c,
                                                            strict=False) if lim > 0 and t >= lim]
    reasons = []
    throttled_freq = len(slow) >= MIN_INTERVALS and len(slow) >= SUSTAINED * len(busy)
    if throttled_freq and max_mhz:
        reasons.append(f"throttled: the mean core frequency fell below "
                       f"{THROTTLE_FREQ_SHARE:.0%} of the {max_mhz:.0f} MHz maximum in "
                       f"{len(slow)} of {len(busy)} busy seconds (lowest {min(slow):.0f} MHz)")
    if hot:
        reasons.append(f"throttled: a temperature reached its limit ({hot[0][1]:.0f} C >= "
                       f"{hot[0][2]:.0f} C) in {len(hot)} readings")
    is_contended = (len(contended) >= MIN_INTERVALS
                    and len(contended) >= SUSTAINED * len(active))
    if is_contended:
        reasons.append(f"contended: other processes used >= {OTHER_SHARE:.0%} of the cores "
                       f"while the host was saturated in {len(contended)} of {len(active)} "
                       f"seconds of the run (mean {_mean([p.other_pct for p in active]):.0f} %)")
    gpus = [g for s in samples for g in s.gpus]
    mems = [s.mem_kb[1] for s in samples if s.mem_kb]
    temps = [t for s in samples for t in s.temp_c if t > 0]
    return TelemetrySummary(
        samples=len(samples), cpus=max((s.ncpu for s in samples), default=0),
        duration_s=round(samples[-1].up - samples[0].up, 1) if samples else 0.0,
        cpu_mean_pct=_round(_mean([p.cpu_pct for p in pts])),
        cpu_max_pct=_round(max((p.cpu_pct for p in pts), default=None)),
        run_cpu_mean_pct=_round(_mean([p.run_pct for p in with_run])),
        other_mean_pct=_round(_mean([p.other_pct for p in with_run])),
        other_max_pct=_round(max((p.other_pct or 0 for p in with_run), default=None)),
        contended_share=round(len(contended) / len(active), 3) if active else None,
        freq_min_mhz=_round(min(freqs, default=None)), freq_max_mhz=_round(max_mhz),
        temp_max_c=_round(max(temps, default=None)),
        load_max=_round(max((s.load1 for s in samples if s.load1 is not None), default=None)),
        mem_min_available_mb=_round(min(mems) / 1024 if mems else None),
        gpu_util_max_pct=_round(max((g["util_pct"] for g in gpus if "util_pct" in g),
                                    default=None)),
        gpu_power_max_w=_round(max((g["power_w"] for g in gpus if "power_w" in g),
                                   default=None)),
        gpu_temp_max_c=_round(max((g["temp_c"] for g in gpus if "temp_c" in g), default=None)),
        sampler_cpu_s=round(trace.sampler_ticks / trace.hz, 3) if trace.sampler_ticks else None,
        skipped_lines=trace.skipped, throttled=throttled_freq or bool(hot),
        contended=is_contended, reasons=reasons)


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
