"""Memory: capacity from /proc/meminfo, DIMM configuration from `dmidecode -t memory`.

dmidecode needs root (or `sudo -n`), and virtual machines often have no SMBIOS memory devices;
then the DIMM configuration is a marked gap that the pre-flight asks a person to fill.
"""

from __future__ import annotations

import re
from collections import Counter

from collectors.command import Facts, is_missing, output_or_empty, run_probe, why_failed
from lab.host import Host

MEMINFO = ("cat", "/proc/meminfo")
DMIDECODE = ("dmidecode", "-t", "memory")
SUDO_DMIDECODE = ("sudo", "-n", *DMIDECODE)


class Dimm(Facts):
    """One populated memory device (SMBIOS type 17)."""

    size_mb: int
    type: str | None = None
    speed_mts: int | None = None
    configured_mts: int | None = None
    form_factor: str | None = None


class MemoryInfo(Facts):
    """Memory of one node; `dimm_gap` says why the DIMMs are unknown when `dimms` is empty."""

    total_kib: int | None = None
    dimms: tuple[Dimm, ...] = ()
    dimm_gap: str | None = None

    @property
    def capacity_text(self) -> str | None:
        """Installed capacity from the DIMMs, else the usable capacity the kernel sees."""
        if self.dimms:
            return _size_text(sum(d.size_mb for d in self.dimms) / 1024)
        if self.total_kib:
            return f"{self.total_kib / 1024**2:.1f} GiB"
        return None

    @property
    def configuration_text(self) -> str | None:
        """E.g. "16x 64 GB DDR5 4800 MT/s (configured 4400 MT/s)"; None when unknown."""
        if not self.dimms:
            return None
        groups = Counter(_dimm_text(d) for d in self.dimms)
        return " + ".join(f"{count}x {text}" for text, count in groups.items())


def collect(host: Host) -> MemoryInfo:
    """Read /proc/meminfo and, where permitted, dmidecode's memory devices."""
    meminfo = output_or_empty(run_probe(host, MEMINFO))
    result = run_probe(host, DMIDECODE)
    if not result.ok and not is_missing(result):
        sudo = run_probe(host, SUDO_DMIDECODE)
        result = sudo if sudo.ok else result
    if not result.ok:
        return parse(meminfo, "", gap=why_failed(result))
    return parse(meminfo, result.stdout)


def parse(meminfo_text: str, dmidecode_text: str, *, gap: str | None = None) -> MemoryInfo:
    """Build MemoryInfo from /proc/meminfo and dmidecode output (empty when it did not run)."""
    total = re.search(r"^MemTotal:\s+(\d+)\s*kB", meminfo_text, re.M)
    dimms = parse_dmidecode(dmidecode_text)
    if not dimms and gap is None:
        gap = ("this machine has no SMBIOS tables for dmidecode to read" if "No SMBIOS" in
               dmidecode_text else "dmidecode lists no populated memory devices")
    return MemoryInfo(total_kib=int(total.group(1)) if total else None, dimms=dimms,
                      dimm_gap=None if dimms else gap)


def parse_dmidecode(text: str) -> tuple[Dimm, ...]:
    """The populated memory devices in `dmidecode -t memory` output."""
    dimms = []
    for block in re.split(r"\n(?=Handle 0x)", text):
        if "\nMemory Device" not in block:
            continue
        fields = dict(_pairs(block))
        size_mb = _size_mb(fields.get("Size", ""))
        if size_mb:
            dimms.append(Dimm(
                size_mb=size_mb,
                type=_known(fields.get("Type")),
                speed_mts=_mts(fields.get("Speed")),
                configured_mts=_mts(fields.get("Configured Memory Speed")
                                    or fields.get("Configured Clock Speed")),
                form_factor=_known(fields.get("Form Factor")),
            ))
    return tuple(dimms)


def _pairs(block: str) -> list[tuple[str, str]]:
    pairs = []
    for line in block.splitlines():
        if line.startswith("\t") and not line.startswith("\t\t"):
            key, sep, value = line.strip().partition(":")
            if sep:
                pairs.append((key.strip(), value.strip()))
    return pairs


def _size_mb(text: str) -> int | None:
    match = re.match(r"(\d+)\s*(kB|MB|GB|TB)\b", text)
    if not match:
        return None  # "No Module Installed", "Unknown"
    scale = {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024**2}[match.group(2)]
    return int(int(match.group(1)) * scale)


def _mts(text: str | None) -> int | None:
    match = re.match(r"(\d+)\s*(MT/s|MHz)", text or "")
    return int(match.group(1)) if match else None


def _known(text: str | None) -> str | None:
    return None if not text or text in ("Unknown", "Other", "Not Specified") else text


def _dimm_text(dimm: Dimm) -> str:
    parts = [_size_text(dimm.size_mb / 1024)]
    if dimm.type:
        parts.append(dimm.type)
    if dimm.speed_mts:
        parts.append(f"{dimm.speed_mts} MT/s")
    text = " ".join(parts)
    if dimm.configured_mts and dimm.configured_mts != dimm.speed_mts:
        text += f" (configured {dimm.configured_mts} MT/s)"
    return text


def _size_text(gb: float) -> str:
    if gb >= 1024:
        return f"{gb / 1024:g} TB"
    return f"{gb:g} GB"
