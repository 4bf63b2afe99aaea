"""Everything the collectors found on one host, and what it says about each system JSON field.

`detect` runs every collector; `detected_fields` turns their models into field values, each
with the command it came from, or a gap (value None) with the reason nothing is known.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict

from collectors import (
    accelerators,
    cpu,
    docker_engine,
    machine,
    memory,
    network,
    osinfo,
    software,
    storage,
)
from collectors.accelerators import AcceleratorInfo
from collectors.command import Facts
from collectors.cpu import CpuInfo
from collectors.docker_engine import DockerEngine
from collectors.interconnect import host_processor_interconnect
from collectors.machine import MachineInfo
from collectors.memory import MemoryInfo
from collectors.network import NetworkInfo
from collectors.osinfo import OsInfo
from collectors.software import SoftwareStack
from collectors.storage import StorageInfo
from lab.config import HostConfig
from lab.host import Host

Value = str | int
COLLECTORS_AT_ONCE = 4  # with a run's own commands beside them, well under sshd's MaxSessions (10)


class HostFacts(Facts):
    """The models of every collector for one host."""

    cpu: CpuInfo
    memory: MemoryInfo
    storage: StorageInfo
    accelerators: AcceleratorInfo
    network: NetworkInfo
    os: OsInfo
    docker: DockerEngine
    machine: MachineInfo
    software: tuple[SoftwareStack, ...] = ()


class Detected(BaseModel):
    """A field value found on the host (`by` names how), or None with the reason in `note`."""

    model_config = ConfigDict(frozen=True)

    value: Value | None
    by: str
    note: str | None = None


def detect(host: Host, config: HostConfig, images: Sequence[str] = ()) -> HostFacts:
    """Run every collector on host; images are the benchmark images whose stack is described.

    The collectors only read, so they run side by side over the host's connection (a few at a
    time: sshd serves a bounded number of sessions per connection): about twenty short commands
    cost the round trips of the longest collector instead of all of them, before a campaign's
    first run."""
    wanted: list[str | None] = list(images)
    if not images and not config.docker.engine:
        wanted = [None]  # native runs: the host's Python
    with ThreadPoolExecutor(max_workers=COLLECTORS_AT_ONCE,
                            thread_name_prefix=f"describe-{host.name}") as pool:
        stacks = [pool.submit(software.collect, host, config.docker, image) for image in wanted]
        cpu_f, memory_f = pool.submit(cpu.collect, host), pool.submit(memory.collect, host)
        storage_f = pool.submit(storage.collect, host)
        accelerators_f = pool.submit(accelerators.collect, host)
        network_f, os_f = pool.submit(network.collect, host), pool.submit(osinfo.collect, host)
        docker_f = pool.submit(docker_engine.collect, host, config.docker)
        machine_f = pool.submit(machine.collect, host, config.work_dir)
        return HostFacts(
            cpu=cpu_f.result(), memory=memory_f.result(), storage=storage_f.result(),
            accelerators=accelerators_f.result(), network=network_f.result(),
            os=os_f.result(), docker=docker_f.result(), machine=machine_f.result(),
            software=tuple(future.result() for future in stacks))


def detected_fields(facts: HostFacts) -> dict[str, Detected]:
    """The system JSON fields the facts determine (or leave as explained gaps)."""
    fields = {**_cpu_fields(facts.cpu), **_memory_fields(facts.memory),
              **_storage_fields(facts.storage), **_network_fields(facts.network),
              **accelerator_fields(facts.accelerators, facts.memory),
              **_software_fields(facts)}
    fields["operating_system"] = Detected(value=facts.os.text, by="/etc/os-release, uname")
    m = facts.machine
    fields["boot_firmware_version"] = Detected(value=m.firmware_text, by="/sys/class/dmi/id")
    fields["power_management"] = Detected(value=m.power_management_text, by="cpufreq sysfs")
    fields["filesystem"] = Detected(value=m.filesystem, by="findmnt (work_dir)")
    return fields


def _cpu_fields(c: CpuInfo) -> dict[str, Detected]:
    by = "lscpu, /proc/cpuinfo"
    return {
        "host_processor_model_name": Detected(value=c.model_name, by=by),
        "host_processors_per_node": Detected(value=c.sockets, by=by),
        "host_processor_core_count": Detected(value=c.cores_per_socket, by=by),
        "host_processor_frequency": Detected(
            value=f"{c.max_mhz:.0f} MHz" if c.max_mhz else None, by=by),
        "host_processor_caches": Detected(value=c.caches_text or None, by=by),
        "host_processor_interconnect": Detected(
            value=host_processor_interconnect(c), by="inferred from the processor model",
            note="no rule for this processor family"),
    }


def _memory_fields(m: MemoryInfo) -> dict[str, Detected]:
    by = "dmidecode -t memory" if m.dimms else "/proc/meminfo"
    return {
        "host_memory_capacity": Detected(value=m.capacity_text, by=by),
        "host_memory_configuration": Detected(value=m.configuration_text,
                                              by="dmidecode -t memory", note=m.dimm_gap),
    }


def _storage_fields(s: StorageInfo) -> dict[str, Detected]:
    by = "lsblk"
    return {
        "host_storage_capacity": Detected(value=s.capacity_text, by=by, note=s.gap),
        "host_storage_type": Detected(value=s.type_text, by=by, note=s.gap),
        "disk_drives": Detected(value=s.drives_text, by=by, note=s.gap),
    }


def _network_fields(n: NetworkInfo) -> dict[str, Detected]:
    by = "/sys/class/net, ethtool"
    none = "no physical network interface found"
    return {
        "host_networking": Detected(value=n.networking_text, by=by, note=none),
        "host_network_card_count": Detected(value=len(n.nics) or "0", by=by),
        "number_of_type_nics_installed": Detected(value=n.types_text, by=by, note=none),
        "nics_enabled_os": Detected(value=sum(1 for x in n.nics if x.up), by=by),
        "nics_enabled_connected": Detected(value=sum(1 for x in n.nics if x.connected), by=by),
        "network_speed_mbit": Detected(value=n.max_speed_mbit, by=by, note="link speed unknown"),
    }


def accelerator_fields(a: AcceleratorInfo, mem: MemoryInfo) -> dict[str, Detected]:
    """Accelerator fields; a CPU-only node gets "0" and "N/A", which the checker accepts."""
    names = ("accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
             "accelerator_memory_configuration", "accelerator_frequency",
             "accelerator_host_interconnect", "accelerator_interconnect",
             "accelerator_interconnect_topology")
    by = {"nvidia": "nvidia-smi", "amd": "rocm-smi", "jetson": "/proc/device-tree/model",
          "none": "nvidia-smi, rocm-smi, device tree", "unknown": "accelerator probe"}[a.vendor]
    if a.vendor == "unknown":
        return {n: Detected(value=None, by=by, note=a.gap) for n in names}
    if a.vendor == "none":
        return {n: Detected(value="0" if n == names[0] else "N/A", by=by) for n in names}
    memory_type = re.search(r"\b(HBM\d?e?|GDDR\d\w?|LPDDR\d\w?)\b", a.model_text or "")
    values: dict[str, Value | None] = {
        "accelerators_per_node": len(a.devices),
        "accelerator_model_name": a.model_text,
        "accelerator_memory_capacity": a.memory_text,
        "accelerator_memory_configuration": memory_type.group(1) if memory_type else None,
        "accelerator_frequency": a.frequency_text,
        "accelerator_host_interconnect": a.host_interconnect_text,
        "accelerator_interconnect": a.links.interconnect_text,
        "accelerator_interconnect_topology": a.links.topology_text,
    }
    if a.shared_memory:
        values["accelerator_memory_capacity"] = f"shared with the host ({mem.capacity_text})"
        values["accelerator_memory_configuration"] = "shared with the host"
        values["accelerator_interconnect"] = values["accelerator_interconnect_topology"] = "N/A"
    note = f"{by} does not report it"
    return {n: Detected(value=values[n], by=by, note=note) for n in names}


def _software_fields(facts: HostFacts) -> dict[str, Detected]:
    framework, stack = software.merge(list(facts.software))
    gaps = "; ".join(s.gap for s in facts.software if s.gap) or (
        "no benchmark image given to look inside" if not facts.software else None)
    driver = {"nvidia": "NVIDIA driver", "amd": "AMD GPU driver", "jetson": ""}.get(
        facts.accelerators.vendor)
    extra = [facts.docker.text, f"{driver} {facts.accelerators.driver}".strip()
             if driver is not None and facts.accelerators.driver else None]
    other = ", ".join(p for p in (stack, *extra) if p) or None
    by = "probe in " + (", ".join(s.source for s in facts.software) or "no image")
    return {
        "framework": Detected(value=framework, by=by, note=gaps),
        "other_software_stack": Detected(value=other, by=by + ", docker version", note=gaps),
    }
