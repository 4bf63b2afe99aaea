"""Interconnect hints: GPU-to-GPU links from `nvidia-smi topo -m`, and the usual socket link.

These are hints: the matrix says which GPU pairs share NVLink, not whether an NVSwitch sits in
between; the socket link is inferred from the processor family. Both are recorded as detected
and a person may override them in hosts.yaml.
"""

from __future__ import annotations

import re

from collectors.command import Facts
from collectors.cpu import CpuInfo

NVIDIA_TOPO = ("nvidia-smi", "topo", "-m")


class GpuLinks(Facts):
    """How the GPUs of a node are linked, from the topology matrix."""

    gpus: int = 0
    pairs: int = 0
    nvlink_pairs: int = 0
    nvlink_labels: tuple[str, ...] = ()  # e.g. ("NV18",): bonded NVLinks per pair

    @property
    def interconnect_text(self) -> str | None:
        """NVLink, PCIe, or N/A for a single GPU; None when the matrix said nothing."""
        if self.gpus == 1:
            return "N/A (one accelerator)"
        if not self.pairs:
            return None
        return "NVLink" if self.nvlink_pairs else "PCIe"

    @property
    def topology_text(self) -> str | None:
        """E.g. "NVLink between all 8 GPUs (NV18 per pair)"."""
        if not self.pairs:
            return None
        labels = "/".join(self.nvlink_labels)
        if self.nvlink_pairs == self.pairs:
            return f"NVLink between all {self.gpus} GPUs ({labels} per pair)"
        if self.nvlink_pairs:
            return (f"NVLink on {self.nvlink_pairs} of {self.pairs} GPU pairs ({labels}), "
                    "PCIe otherwise")
        return f"PCIe between all {self.gpus} GPUs"


def parse_nvidia_topo(text: str) -> GpuLinks:
    """Read the GPU rows and columns of `nvidia-smi topo -m`."""
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    if not rows:
        return GpuLinks()
    header = [cell.strip() for cell in rows[0]]
    columns = [i for i, cell in enumerate(header) if re.fullmatch(r"GPU\d+", cell)]
    links: dict[tuple[int, int], str] = {}
    for row in rows[1:]:
        name = row[0].strip()
        if not re.fullmatch(r"GPU\d+", name):
            continue
        me = int(name[3:])
        for col in columns:
            other = int(header[col][3:])
            if col < len(row) and other != me:
                links[(min(me, other), max(me, other))] = row[col].strip()
    gpus = sum(1 for row in rows[1:] if re.fullmatch(r"GPU\d+", row[0].strip()))
    nv = [label for label in links.values() if label.startswith("NV")]
    return GpuLinks(gpus=gpus, pairs=len(links), nvlink_pairs=len(nv),
                    nvlink_labels=tuple(sorted(set(nv))))


def host_processor_interconnect(cpu: CpuInfo) -> str | None:
    """The link between sockets a processor family uses; N/A for one socket; None if unsure."""
    if cpu.sockets <= 1:
        return "N/A (one socket)"
    model = cpu.model_name or ""
    if cpu.vendor == "GenuineIntel" and "Xeon" in model:
        scalable = re.search(r"Platinum|Gold|Silver|Bronze|Xeon(\(R\))? (Max|6\d{3})", model)
        return "UPI" if scalable else "QPI"
    if cpu.vendor == "AuthenticAMD" and "EPYC" in model:
        return "Infinity Fabric (xGMI)"
    return None
