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
    """Read the GPU rows and columns of `nvidia-smi topo -m` (tab- or space-separated)."""
    # The header row is underlined with escape codes even when stdout is not a terminal.
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    rows = [_cells(line) for line in lines if line.strip()]
    # The header and the first GPU row both start with GPU0; the header comes first.
    start = next((i for i, row in enumerate(rows) if row[0] == "GPU0"), None)
    if start is None:
        return GpuLinks()
    columns = [int(cell[3:]) for cell in rows[start] if re.fullmatch(r"GPU\d+", cell)]
    links: dict[tuple[int, int], str] = {}
    gpus = 0
    for row in rows[start + 1:]:
        if not re.fullmatch(r"GPU\d+", row[0]):
            continue
        gpus += 1
        me = int(row[0][3:])
        for other, label in zip(columns, row[1:], strict=False):
            if other != me:
                links[(min(me, other), max(me, other))] = label
    nv = [label for label in links.values() if label.startswith("NV")]
    return GpuLinks(gpus=gpus, pairs=len(links), nvlink_pairs=len(nv),
                    nvlink_labels=tuple(sorted(set(nv))))


def _cells(line: str) -> list[str]:
    cells = line.split("\t") if "\t" in line else line.split()
    return [cell.strip() for cell in cells if cell.strip()]


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
