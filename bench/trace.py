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
class Header:
    """What a sampler said when it started: its clocks and the units of its readings."""

    epoch: float  # wall clock (s) at ...
    up: float  # ... this uptime (s): a sample's time is epoch + (its up - up)
    hz: float  # /proc/stat ticks per second
    run_unit_s: float | None  # seconds per unit of the run's CPU counter (None: not read)
    gpu: str  # "nvidia", "rocm" or ""


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
    header: Header | None = None
    for line in lines:
        if not line.strip():
            continue
        item = _json(line)
        if item is None:
            trace.skipped += 1
        elif "v" in item:
            header = _header(trace, item)
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


def _header(trace: Trace, item: dict[str, object]) -> Header | None:
    epoch, up, hz = _num(item.get("epoch")), _num(item.get("up")), _num(item.get("hz"))
    if epoch is None or up is None or not 0 <= epoch < 1e11 or not hz or hz <= 0:
        return None
    trace.hz = hz
    max_khz = _nums(item.get("max_khz")) or []
    if max_khz:
        trace.max_khz = max(max_khz)
    trace.limits_c = [v / 1000 for v in _nums(item.get("limits_mc")) or []]
    unit = {"us": 1e-6, "ns": 1e-9, "ticks": 1 / hz}.get(str(item.get("run_unit")))
    return Header(epoch, up, hz, unit, str(item.get("gpu", "")))


def _sample(item: dict[str, object], header: Header) -> Sample | None:
    up, cpu, cores = _num(item.get("up")), _nums(item.get("cpu")), item.get("cores")
    if up is None or cpu is None or len(cpu) < 4 or not 0 <= up - header.up < 1e7:
        return None
    if not isinstance(cores, list) or len(cores) > 4096:
        return None
    load = _nums(item.get("load")) or []
    mem = _nums(item.get("mem_kb")) or []
    run = _num(item.get("run"))
    return Sample(
        t=datetime.fromtimestamp(header.epoch, UTC) + timedelta(seconds=up - header.up), up=up,
        cpu=tuple(cpu[:8]), khz=_nums(item.get("khz")) or [],
        temp_c=[v / 1000 for v in _nums(item.get("temp_mc")) or []],
        load1=load[0] if load else None, mem_kb=(mem[0], mem[1]) if len(mem) == 2 else None,
        run_s=run * header.run_unit_s if run is not None and header.run_unit_s else None,
        gpus=_gpus(item.get("gpu"), header.gpu), ncpu=len(cores))


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
    pts, samples = points(trace), trace.samples
    with_run = [p for p in pts if p.run_pct is not None and p.other_pct is not None]
    contention, share = _contention(with_run)
    throttling = _throttling(trace, pts)
    freqs = [p.mhz for p in pts if p.cpu_pct >= 100 * BUSY and p.mhz is not None]
    gpus = [g for s in samples for g in s.gpus]
    mems = [s.mem_kb[1] for s in samples if s.mem_kb]
    return TelemetrySummary(
        samples=len(samples), cpus=max((s.ncpu for s in samples), default=0),
        duration_s=round(samples[-1].up - samples[0].up, 1) if samples else 0.0,
        cpu_mean_pct=_round(_mean([p.cpu_pct for p in pts])),
        cpu_max_pct=_round(max((p.cpu_pct for p in pts), default=None)),
        run_cpu_mean_pct=_round(_mean([p.run_pct for p in with_run])),
        other_mean_pct=_round(_mean([p.other_pct for p in with_run])),
        other_max_pct=_round(max((p.other_pct or 0 for p in with_run), default=None)),
        contended_share=share, freq_min_mhz=_round(min(freqs, default=None)),
        freq_max_mhz=_round(trace.max_khz / 1000 if trace.max_khz else None),
        temp_max_c=_round(max((t for s in samples for t in s.temp_c if t > 0), default=None)),
        load_max=_round(max((s.load1 for s in samples if s.load1 is not None), default=None)),
        mem_min_available_mb=_round(min(mems) / 1024 if mems else None),
        gpu_util_max_pct=_gpu_max(gpus, "util_pct"), gpu_power_max_w=_gpu_max(gpus, "power_w"),
        gpu_temp_max_c=_gpu_max(gpus, "temp_c"),
        sampler_cpu_s=round(trace.sampler_ticks / trace.hz, 3) if trace.sampler_ticks else None,
        skipped_lines=trace.skipped, throttled=bool(throttling), contended=bool(contention),
        reasons=[*throttling, *contention])


def _throttling(trace: Trace, pts: list[Point]) -> list[str]:
    """Why the host throttled: a low clock while busy, sustained; a temperature at its limit."""
    reasons = []
    busy = [p for p in pts if p.cpu_pct >= 100 * BUSY]
    max_mhz = trace.max_khz / 1000 if trace.max_khz else None
    slow = [p.mhz for p in busy if max_mhz and p.mhz is not None
            and p.mhz < THROTTLE_FREQ_SHARE * max_mhz]
    if max_mhz and len(slow) >= MIN_INTERVALS and len(slow) >= SUSTAINED * len(busy):
        reasons.append(f"throttled: the mean core frequency fell below "
                       f"{THROTTLE_FREQ_SHARE:.0%} of the {max_mhz:.0f} MHz maximum in "
                       f"{len(slow)} of {len(busy)} busy seconds (lowest "
                       f"{min(m for m in slow if m is not None):.0f} MHz)")
    hot = [(t, lim) for s in trace.samples
           for t, lim in zip(s.temp_c, trace.limits_c, strict=False) if 0 < lim <= t]
    if hot:
        reasons.append(f"throttled: a temperature reached its limit ({hot[0][0]:.0f} C >= "
                       f"{hot[0][1]:.0f} C) in {len(hot)} readings")
    return reasons


def _contention(with_run: list[Point]) -> tuple[list[str], float | None]:
    """Why the run was contended, and the share of its seconds that were."""
    active = [p for p in with_run if (p.run_pct or 0) >= 5.0]  # the run was working
    contended = [p for p in active if p.cpu_pct >= 100 * SATURATED
                 and (p.other_pct or 0) >= 100 * OTHER_SHARE]
    share = round(len(contended) / len(active), 3) if active else None
    if len(contended) < MIN_INTERVALS or len(contended) < SUSTAINED * len(active):
        return [], share
    return [f"contended: other processes used >= {OTHER_SHARE:.0%} of the cores while the "
            f"host was saturated in {len(contended)} of {len(active)} seconds of the run "
            f"(mean {_mean([p.other_pct for p in active]):.0f} %)"], share


def _gpu_max(gpus: list[dict[str, float]], name: str) -> float | None:
    return _round(max((g[name] for g in gpus if name in g), default=None))


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
