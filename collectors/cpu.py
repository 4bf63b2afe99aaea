"""CPU: model, sockets, cores, threads, frequency and caches, from `lscpu -J` and /proc/cpuinfo.

lscpu's JSON is flat in util-linux 2.38+ when piped, nested under "children" in 2.37, and
plain "Field: value" text before 2.30; all three are read. ARM SoCs report `Socket(s): -` with
clusters instead; such a chip counts as one processor.
"""

from __future__ import annotations

import json
import re

from collectors.command import Facts, output_or_empty, run_probe
from lab.host import Host

LSCPU = ("lscpu", "-J")
LSCPU_TEXT = ("lscpu",)
CPUINFO = ("cat", "/proc/cpuinfo")
CACHE_NAMES = ("L1d", "L1i", "L2", "L3", "L4")


class Cache(Facts):
    """One cache level as lscpu reports it: total size and, in newer lscpu, instance count."""

    name: str
    size: str


class CpuInfo(Facts):
    """The host processors of one node."""

    architecture: str | None = None
    vendor: str | None = None
    model_name: str | None = None
    sockets: int = 1
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    logical_cpus: int | None = None
    max_mhz: float | None = None
    caches: tuple[Cache, ...] = ()
    board: str | None = None  # /proc/cpuinfo "Model" on boards such as the Raspberry Pi

    @property
    def caches_text(self) -> str:
        """The caches as one line, e.g. "L1d: 96 KiB (2 instances), L2: 2 MiB (2 instances)"."""
        return ", ".join(f"{c.name}: {c.size}" for c in self.caches)


def collect(host: Host) -> CpuInfo:
    """Run lscpu (JSON, else text) and read /proc/cpuinfo on host."""
    lscpu = run_probe(host, LSCPU)
    if not lscpu.ok:
        lscpu = run_probe(host, LSCPU_TEXT)
    return parse(output_or_empty(lscpu), output_or_empty(run_probe(host, CPUINFO)))


def parse(lscpu_text: str, cpuinfo_text: str = "") -> CpuInfo:
    """Build CpuInfo from lscpu output (JSON or text), falling back on /proc/cpuinfo."""
    fields = lscpu_fields(lscpu_text)
    info = cpuinfo_fields(cpuinfo_text)
    logical = _int(fields.get("CPU(s)")) or info.processors
    threads = _int(fields.get("Thread(s) per core"))
    sockets = _int(fields.get("Socket(s)")) or info.sockets or 1
    cores = _int(fields.get("Core(s) per socket"))
    per_cluster = _int(fields.get("Core(s) per cluster"))
    if cores is None and per_cluster:
        cores = per_cluster * (_int(fields.get("Cluster(s)")) or 1)  # an SoC: one package
    if cores is None:
        cores = info.cores or (logical // (threads or 1) // sockets if logical else None)
    if threads is None and logical and cores:
        threads = max(1, logical // (cores * sockets))
    return CpuInfo(
        architecture=fields.get("Architecture"),
        vendor=fields.get("Vendor ID") or info.vendor,
        model_name=_model_name(fields, info.model_name),
        sockets=sockets,
        cores_per_socket=cores,
        threads_per_core=threads,
        logical_cpus=logical,
        max_mhz=_float(fields.get("CPU max MHz")) or _float(info.mhz),
        caches=tuple(Cache(name=n, size=fields[n]) for n in CACHE_NAMES if fields.get(n)),
        board=info.board,
    )


def lscpu_fields(text: str) -> dict[str, str]:
    """lscpu's fields by name, without the trailing colon; cache fields named L1d, L2, ..."""
    text = text.strip()
    if not text:
        return {}
    pairs: list[tuple[str, str]] = []
    if text.startswith("{"):
        _walk(json.loads(text).get("lscpu", []), pairs)
    else:
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                pairs.append((key.strip(), value.strip()))
    fields: dict[str, str] = {}
    for key, value in pairs:
        key = key.strip().rstrip(":")
        key = re.sub(r"^(L\d[di]?) cache$", r"\1", key)
        if value and key not in fields:
            fields[key] = value
    return fields


def _walk(entries: list[dict[str, object]], pairs: list[tuple[str, str]]) -> None:
    for entry in entries:
        pairs.append((str(entry.get("field", "")), str(entry.get("data") or "")))
        children = entry.get("children")
        if isinstance(children, list):
            _walk(children, pairs)


class Cpuinfo(Facts):
    """What /proc/cpuinfo adds to lscpu."""

    model_name: str | None = None
    vendor: str | None = None
    processors: int | None = None
    sockets: int | None = None
    cores: int | None = None
    mhz: str | None = None
    board: str | None = None


def cpuinfo_fields(text: str) -> Cpuinfo:
    """What /proc/cpuinfo adds: model name, processors, sockets, cores, MHz, board model."""
    first: dict[str, str] = {}
    processors = 0
    physical_ids: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep:
            continue
        if key == "processor":
            processors += 1
        elif key == "physical id":
            physical_ids.add(value)
        first.setdefault(key, value)
    return Cpuinfo(
        model_name=first.get("model name"),
        vendor=first.get("vendor_id"),
        processors=processors or None,
        sockets=len(physical_ids) or None,
        cores=_int(first.get("cpu cores")),
        mhz=first.get("cpu MHz"),
        board=first.get("Model"),
    )


def _model_name(fields: dict[str, str], fallback: str | None) -> str | None:
    name = fields.get("Model name") or fallback
    if not name or name == "-":
        return None
    vendor = fields.get("Vendor ID", "")
    # ARM cores are named by core ("Cortex-A78AE"); say whose core it is.
    if vendor and vendor not in ("GenuineIntel", "AuthenticAMD") and vendor not in name:
        return f"{vendor} {name}"
    return name


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _float(value: object) -> float | None:
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None
