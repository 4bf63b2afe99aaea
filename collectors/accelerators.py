"""Accelerators: NVIDIA GPUs (nvidia-smi), AMD GPUs (rocm-smi), a Jetson's integrated GPU, or none.

A tool that is installed but fails (a driver not loaded) is a gap, never "no accelerator": a
GPU box must not be described as CPU-only because its driver was down during the probe.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Literal

from collectors.command import Facts, is_missing, output_or_empty, run_probe, why_failed
from collectors.interconnect import NVIDIA_TOPO, GpuLinks, parse_nvidia_topo
from lab.host import Host

NVIDIA_FIELDS = ("name", "memory.total", "clocks.max.sm", "pcie.link.gen.max",
                 "pcie.link.width.max", "driver_version")
NVIDIA_QUERY = ("nvidia-smi", f"--query-gpu={','.join(NVIDIA_FIELDS)}",
                "--format=csv,noheader,nounits")
ROCM_SMI = ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion",
            "--json")
DT_MODEL = ("cat", "/proc/device-tree/model")
TEGRA_RELEASE = ("cat", "/etc/nv_tegra_release")
INTEGRATED = "(nvgpu)"  # how JetPack 6's nvidia-smi names a Jetson's integrated GPU


class Accelerator(Facts):
    """One accelerator device."""

    name: str
    memory_mib: int | None = None
    max_mhz: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None


class AcceleratorInfo(Facts):
    """The accelerators of a node; vendor "none" means looked for and not found."""

    vendor: Literal["nvidia", "amd", "jetson", "none", "unknown"]
    devices: tuple[Accelerator, ...] = ()
    driver: str | None = None
    links: GpuLinks = GpuLinks()
    shared_memory: bool = False  # an integrated GPU using host memory (Jetson)
    gap: str | None = None

    @property
    def model_text(self) -> str | None:
        """E.g. "NVIDIA H100 80GB HBM3", or "2x A + 1x B" when a node mixes models."""
        names = Counter(d.name for d in self.devices)
        if len(names) == 1:
            return next(iter(names))
        return " + ".join(f"{n}x {name}" for name, n in names.items()) or None

    @property
    def memory_text(self) -> str | None:
        """Memory of one accelerator, e.g. "80 GB" (nvidia-smi reports MiB)."""
        sizes = {d.memory_mib for d in self.devices if d.memory_mib}
        return " / ".join(f"{mib / 1024:.0f} GB" for mib in sorted(sizes)) or None

    @property
    def frequency_text(self) -> str | None:
        clocks = {d.max_mhz for d in self.devices if d.max_mhz}
        return " / ".join(f"{mhz} MHz" for mhz in sorted(clocks)) or None

    @property
    def host_interconnect_text(self) -> str | None:
        """E.g. "PCIe Gen5 x16"; "integrated (SoC)" for a Jetson."""
        if self.vendor == "jetson":
            return "integrated in the SoC"
        links = dict.fromkeys(
            f"PCIe Gen{d.pcie_gen}" + (f" x{d.pcie_width}" if d.pcie_width else "")
            for d in self.devices if d.pcie_gen
        )
        return ", ".join(links) or None


def collect(host: Host) -> AcceleratorInfo:
    """Look for NVIDIA, then AMD, then Jetson accelerators on host."""
    nvidia = run_probe(host, NVIDIA_QUERY)
    if nvidia.ok and INTEGRATED not in nvidia.stdout:
        topo = output_or_empty(run_probe(host, NVIDIA_TOPO))
        return parse_nvidia(nvidia.stdout, topo)
    if not nvidia.ok and not is_missing(nvidia):
        return AcceleratorInfo(vendor="unknown", gap=why_failed(nvidia))
    if not nvidia.ok:
        rocm = run_probe(host, ROCM_SMI)
        if rocm.ok:
            return parse_rocm(rocm.stdout)
        if not is_missing(rocm):
            return AcceleratorInfo(vendor="unknown", gap=why_failed(rocm))
    model = output_or_empty(run_probe(host, DT_MODEL))
    return parse_jetson(model, output_or_empty(run_probe(host, TEGRA_RELEASE)),
                        output_or_empty(nvidia))


def parse_nvidia(query_text: str, topo_text: str = "") -> AcceleratorInfo:
    """Build AcceleratorInfo from the nvidia-smi CSV query (with or without units) and topo."""
    devices, drivers = [], set()
    for line in query_text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(NVIDIA_FIELDS):
            continue
        name, memory, clock, gen, width, driver = cells[: len(NVIDIA_FIELDS)]
        devices.append(Accelerator(name=name, memory_mib=_number(memory), max_mhz=_number(clock),
                                   pcie_gen=_number(gen), pcie_width=_number(width)))
        drivers.add(driver)
    links = parse_nvidia_topo(topo_text) if topo_text else GpuLinks(gpus=len(devices))
    if not devices:
        return AcceleratorInfo(vendor="unknown", gap="nvidia-smi listed no GPUs")
    return AcceleratorInfo(vendor="nvidia", devices=tuple(devices),
                           driver=", ".join(sorted(drivers)), links=links)


def parse_rocm(text: str) -> AcceleratorInfo:
    """Build AcceleratorInfo from `rocm-smi --showproductname --showmeminfo vram ... --json`."""
    data = json.loads(text)
    devices = []
    for key, card in data.items():
        if not key.startswith("card") or not isinstance(card, dict):
            continue
        name = card.get("Card Series") or card.get("Card series") or card.get("Card model")
        vram = _number(card.get("VRAM Total Memory (B)"))
        devices.append(Accelerator(name=str(name or "AMD GPU"),
                                   memory_mib=vram // 2**20 if vram else None))
    driver = (data.get("system") or {}).get("Driver version")
    if not devices:
        return AcceleratorInfo(vendor="unknown", gap="rocm-smi listed no GPUs")
    return AcceleratorInfo(vendor="amd", devices=tuple(devices), driver=driver,
                           links=GpuLinks(gpus=len(devices)))


def parse_jetson(dt_model: str, tegra_release: str = "", nvidia_query: str = "") -> AcceleratorInfo:
    """A Jetson's integrated GPU from its device-tree model (or nvidia-smi), else none at all."""
    model = dt_model.replace("\x00", "").strip()
    if "Jetson" in model:
        board = re.sub(r"\s+Developer Kit$", "", model)
    elif INTEGRATED in nvidia_query:
        board = "NVIDIA " + nvidia_query.split(",")[0].replace(INTEGRATED, "").strip()
    else:
        return AcceleratorInfo(vendor="none")
    release = re.search(r"# (R\d+) \(release\), REVISION: ([\d.]+)", tegra_release)
    driver = f"L4T {release.group(1)}.{release.group(2)}" if release else None
    return AcceleratorInfo(vendor="jetson", devices=(Accelerator(name=f"{board} integrated GPU"),),
                           driver=driver, links=GpuLinks(gpus=1), shared_memory=True)


def _number(text: object) -> int | None:
    match = re.match(r"\s*(\d+)", str(text or ""))
    return int(match.group(1)) if match else None
