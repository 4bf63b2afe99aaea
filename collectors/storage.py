"""Storage: the whole disks of a node, their kind and capacity, from `lsblk -J -b -d`.

Older lsblk prints numbers and booleans as strings ("size": "512110190592", "rota": "0"), newer
prints JSON numbers and booleans; both are read. RAM disks, zram, loop and optical devices are
not storage a submission describes.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from collectors.command import Facts, run_probe, why_failed
from lab.host import Host

LSBLK = ("lsblk", "-J", "-b", "-d", "-o", "NAME,TYPE,SIZE,ROTA,TRAN,MODEL")
_NOT_STORAGE = ("zram", "loop", "ram", "sr", "fd", "nbd")


class Disk(Facts):
    """One whole block device."""

    name: str
    size_bytes: int
    rotational: bool = False
    transport: str | None = None
    model: str | None = None

    @property
    def kind(self) -> str:
        """NVMe SSD, SSD, HDD, eMMC, USB disk or virtual disk."""
        if self.transport == "nvme" or self.name.startswith("nvme"):
            return "NVMe SSD"
        if self.name.startswith("mmcblk"):
            return "eMMC/SD"
        if self.transport == "usb":
            return "USB disk"
        if self.name.startswith(("vd", "xvd")):
            return "virtual disk"  # virtio/xen report rotational whatever backs them
        return "HDD" if self.rotational else "SSD"


class StorageInfo(Facts):
    """The disks of one node; `gap` says why none are known."""

    disks: tuple[Disk, ...] = ()
    gap: str | None = None

    @property
    def capacity_text(self) -> str | None:
        """Total capacity in decimal units, as drives are sold (e.g. "7.68 TB")."""
        return _bytes_text(sum(d.size_bytes for d in self.disks)) if self.disks else None

    @property
    def type_text(self) -> str | None:
        """The kinds present, e.g. "NVMe SSD" or "NVMe SSD + HDD"."""
        kinds = list(dict.fromkeys(d.kind for d in self.disks))
        return " + ".join(kinds) or None

    @property
    def drives_text(self) -> str | None:
        """E.g. "2x 3.84 TB NVMe SSD (SAMSUNG MZQL23T8HCLS)", for the power `disk_drives` key."""
        groups = Counter(
            f"{_bytes_text(d.size_bytes)} {d.kind}" + (f" ({d.model})" if d.model else "")
            for d in self.disks
        )
        return ", ".join(f"{n}x {text}" for text, n in groups.items()) or None


def collect(host: Host) -> StorageInfo:
    """Run lsblk on host."""
    result = run_probe(host, LSBLK)
    if not result.ok:
        return StorageInfo(gap=why_failed(result))
    return parse(result.stdout)


def parse(text: str) -> StorageInfo:
    """Build StorageInfo from `lsblk -J -b -d -o NAME,TYPE,SIZE,ROTA,TRAN,MODEL` output."""
    disks = []
    for dev in json.loads(text).get("blockdevices", []):
        name = str(dev.get("name", ""))
        size = int(dev.get("size") or 0)
        if (dev.get("type") != "disk" or size <= 0 or name.startswith(_NOT_STORAGE)
                or re.fullmatch(r"mmcblk\d+(boot\d+|rpmb)", name)):  # eMMC hardware partitions
            continue
        model = (dev.get("model") or "").strip() or None
        disks.append(Disk(name=name, size_bytes=size, rotational=_bool(dev.get("rota")),
                          transport=dev.get("tran") or None, model=model))
    gap = None if disks else "lsblk lists no disks"
    return StorageInfo(disks=tuple(disks), gap=gap)


def _bool(value: object) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true")


def _bytes_text(size: int) -> str:
    if size >= 10**12:
        return f"{size / 10**12:.4g} TB"
    return f"{size / 10**9:.4g} GB"
