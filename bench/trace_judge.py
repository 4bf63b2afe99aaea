"""Judging a run's telemetry trace (`bench.trace` parses it): its numbers and two flags.

Two flags make a warning (never a failure) on the run:
- `throttled`: while the machine was busy, the mean core frequency stayed below
  `THROTTLE_FREQ_SHARE` of the host's maximum for a sustained share of the samples, or a
  temperature reached its zone's limit (the first passive/hot/critical trip point, or hwmon's
  max/crit).
- `contended`: while the run's own cores were saturated, processes outside the run used at
  least `OTHER_SHARE` of them for a sustained share of the run: they took CPU the SUT needed.
  A run pinned to cores of its own (hosts.yaml `cpuset:`) is judged on those alone, so the flag
  says whether pinning kept the others off them; an unpinned run's own cores are all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from bench.trace import Sample, Trace
from lab.cores import core_list

MAX_GAP_S = 5.0  # a longer interval (a sampler restarted on reattachment) gives no deltas
BUSY = 0.5  # share of all cores in use for "busy"
SATURATED = 0.9  # ... for "saturated"
THROTTLE_FREQ_SHARE = 0.7
OTHER_SHARE = 0.2  # of the run's own cores, used outside the run
SUSTAINED = 0.2  # share of the considered intervals
MIN_INTERVALS = 3


class TelemetrySummary(BaseModel):
    """What a run's trace says, kept in its record (`run.json`: `telemetry`)."""

    model_config = ConfigDict(frozen=True)

    samples: int
    duration_s: float
    cpus: int
    own_cores: str | None = None  # the cores the run may run on ("1-3"); None: not known
    cpu_mean_pct: float | None = None  # of all cores
    cpu_max_pct: float | None = None
    run_cpu_mean_pct: float | None = None  # used by the run itself, of its own cores
    other_mean_pct: float | None = None  # used by every other process, of the run's cores
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


@dataclass(frozen=True)
class Point:
    """One interval between two samples: shares of all cores, in percent."""

    t: datetime
    cpu_pct: float
    run_pct: float | None
    other_pct: float | None
    mhz: float | None
    temp_c: float | None


def points(trace: Trace, own: tuple[int, ...] = ()) -> list[Point]:
    """Per interval: CPU in use, by the run and by the others (percent of all cores, or of the
    cores own when given), the mean core frequency and the hottest temperature."""
    out = []
    for a, b in zip(trace.samples, trace.samples[1:], strict=False):
        dt = b.up - a.up
        before, after = (_summed(a, own), _summed(b, own)) if own else (a.cpu, b.cpu)
        if before is None or after is None:
            continue
        delta = [y - x for x, y in zip(before, after, strict=False)]
        total = sum(delta)
        if not 0 < dt <= MAX_GAP_S or total <= 0 or any(d < 0 for d in delta):
            continue
        idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
        busy = max(0.0, min(1.0, (total - idle) / total))
        cores = len(own) or b.ncpu or max(1, round(total / trace.hz / dt))
        run = other = None
        if a.run_s is not None and b.run_s is not None and b.run_s >= a.run_s:
            run = min(1.0, (b.run_s - a.run_s) / dt / cores)
            other = max(0.0, busy - run)
        mhz = sum(b.khz) / len(b.khz) / 1000 if b.khz else None
        out.append(Point(b.t, 100 * busy, None if run is None else 100 * run,
                         None if other is None else 100 * other, mhz,
                         max(b.temp_c) if b.temp_c else None))
    return out


def _summed(sample: Sample, cores: tuple[int, ...]) -> tuple[float, ...] | None:
    """The jiffies of cores, summed field by field; None when the sample lacks one."""
    if any(c not in sample.per_core for c in cores):
        return None
    rows = [sample.per_core[c] for c in cores]
    return tuple(sum(r[i] for r in rows) for i in range(min(len(r) for r in rows)))


def own_cores(trace: Trace) -> tuple[int, ...]:
    """The run's own cores where they are fewer than the host's sampled ones (a pinned run);
    () when the run may use every core, or the trace does not say."""
    sampled = set(trace.samples[-1].per_core) if trace.samples else set()
    own = set(trace.own_cores)
    return tuple(sorted(own)) if own and own < sampled else ()


def summarize(trace: Trace) -> TelemetrySummary:
    """The run's numbers and its flags, contention judged on the run's own cores."""
    pts, samples = points(trace), trace.samples
    own = own_cores(trace)
    mine = points(trace, own) if own else pts
    with_run = [p for p in mine if p.run_pct is not None and p.other_pct is not None]
    contention, share = _contention(with_run, own)
    throttling = _throttling(trace, pts)
    freqs = [p.mhz for p in pts if p.cpu_pct >= 100 * BUSY and p.mhz is not None]
    gpus = [g for s in samples for g in s.gpus]
    mems = [s.mem_kb[1] for s in samples if s.mem_kb]
    return TelemetrySummary(
        samples=len(samples), cpus=max((s.ncpu for s in samples), default=0),
        own_cores=core_list(trace.own_cores) or None,
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


def _contention(with_run: list[Point], own: tuple[int, ...]) -> tuple[list[str], float | None]:
    """Why the run was contended, and the share of its seconds that were."""
    active = [p for p in with_run if (p.run_pct or 0) >= 5.0]  # the run was working
    contended = [p for p in active if p.cpu_pct >= 100 * SATURATED
                 and (p.other_pct or 0) >= 100 * OTHER_SHARE]
    share = round(len(contended) / len(active), 3) if active else None
    if len(contended) < MIN_INTERVALS or len(contended) < SUSTAINED * len(active):
        return [], share
    cores = f"the run's cores {core_list(own)}" if own else "the cores"
    return [f"contended: other processes used >= {OTHER_SHARE:.0%} of {cores} while they were "
            f"saturated in {len(contended)} of {len(active)} seconds of the run "
            f"(mean {_mean([p.other_pct for p in active]):.0f} %)"], share


def _gpu_max(gpus: list[dict[str, float]], name: str) -> float | None:
    return _round(max((g[name] for g in gpus if name in g), default=None))


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
