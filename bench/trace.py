"""Reading a run's telemetry trace (`bench.sampler`'s JSON lines): pure; `bench.trace_judge`
turns it into the run's numbers and flags.

The trace comes from the target, which is not trusted: it is read only up to `MAX_BYTES`, a line
longer than `MAX_LINE` or that is not the expected shape is skipped and counted, and every
number must be finite. Nothing in it names a path; reading it writes nothing.

"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lab.cores import cores_of

MAX_BYTES = 16 * 1024 * 1024
MAX_LINE = 64 * 1024


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
    per_core: dict[int, tuple[float, ...]] = field(default_factory=dict)  # core -> like `cpu`


@dataclass
class Trace:
    """A parsed trace: samples in order, what its headers said, what was skipped."""

    samples: list[Sample] = field(default_factory=list)
    max_khz: float | None = None
    limits_c: list[float] = field(default_factory=list)
    sampler_ticks: float = 0.0
    hz: float = 100.0
    skipped: int = 0
    own_cores: tuple[int, ...] = ()  # the cores the run may run on (its sampler's last word)


@dataclass(frozen=True)
class Header:
    """What a sampler said when it started: its clocks and the units of its readings."""

    epoch: float  # wall clock (s) at ...
    up: float  # ... this uptime (s): a sample's time is epoch + (its up - up)
    hz: float  # /proc/stat ticks per second
    run_unit_s: float | None  # seconds per unit of the run's CPU counter (None: not read)
    gpu: str  # "nvidia", "rocm" or ""


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
    trace.own_cores = _core_list(item.get("own"))
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
        gpus=_gpus(item.get("gpu"), header.gpu), ncpu=len(cores),
        per_core=_per_core(cores, item.get("ids")))


def _core_list(value: object) -> tuple[int, ...]:
    """A core list the sampler wrote ("1-3"); () when absent or not one."""
    if not isinstance(value, str) or not value or len(value) > 4000:
        return ()
    try:
        return cores_of(value)
    except ValueError:
        return ()


def _per_core(cores: list[object], ids: object) -> dict[int, tuple[float, ...]]:
    """Each core's /proc/stat jiffies by core number ({} when any is malformed)."""
    numbers = _nums(ids) if ids is not None else [float(i) for i in range(len(cores))]
    rows = [_nums(c) for c in cores]
    if numbers is None or len(numbers) != len(rows) or any(r is None or len(r) < 4 for r in rows):
        return {}
    return {int(n): tuple(r[:8]) for n, r in zip(numbers, rows, strict=True) if r is not None}


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
