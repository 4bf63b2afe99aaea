"""The collectors' pure parsers on captured and documented command output (tests/samples)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
from collectors.interconnect import host_processor_interconnect, parse_nvidia_topo

SAMPLES = Path(__file__).parent / "samples" / "collectors"
MACHINES = ("lab-vm", "laptop", "server-2s", "gpu-box", "jetson-orin")


def sample(machine_name: str, name: str) -> str:
    path = SAMPLES / machine_name / name
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize(("name", "model", "sockets", "cores", "threads", "cpus", "mhz", "l3"), [
    ("lab-vm", "AMD EPYC", 1, 2, 1, 2, 2596.122, "32 MiB (1 instance)"),
    ("laptop", "12th Gen Intel(R) Core(TM) i7-1260P", 1, 12, 2, 16, 4700.0, "18 MiB (1 instance)"),
    ("server-2s", "Intel(R) Xeon(R) Platinum 8480+", 2, 56, 2, 224, 3800.0,
     "210 MiB (2 instances)"),
    ("gpu-box", "AMD EPYC 9454 48-Core Processor", 2, 48, 2, 192, 3810.791,
     "512 MiB (16 instances)"),
    ("jetson-orin", "ARM Cortex-A78AE", 1, 12, 1, 12, 2201.6001, "6 MiB (3 instances)"),
])
def test_cpu(name: str, model: str, sockets: int, cores: int, threads: int, cpus: int,
             mhz: float, l3: str) -> None:
    info = cpu.parse(sample(name, "lscpu-J.txt"), sample(name, "proc-cpuinfo.txt"))
    assert (info.model_name, info.sockets, info.cores_per_socket) == (model, sockets, cores)
    assert (info.threads_per_core, info.logical_cpus, info.max_mhz) == (threads, cpus, mhz)
    assert [c.name for c in info.caches] == ["L1d", "L1i", "L2", "L3"]
    assert info.caches[-1].size == l3
    assert info.caches_text.startswith("L1d: ")


def test_cpu_from_plain_lscpu_of_old_util_linux() -> None:
    text = ("Architecture:          x86_64\nCPU(s):                40\nThread(s) per core:    2\n"
            "Core(s) per socket:    10\nSocket(s):             2\nVendor ID:             "
            "GenuineIntel\nModel name:            Intel(R) Xeon(R) CPU E5-2630 v4 @ 2.20GHz\n"
            "CPU max MHz:           3100.0000\nL1d cache:             32K\nL3 cache:"
            "              25600K\n")
    info = cpu.parse(text)
    assert (info.sockets, info.cores_per_socket, info.max_mhz) == (2, 10, 3100.0)
    assert info.caches_text == "L1d: 32K, L3: 25600K"
    assert host_processor_interconnect(info) == "QPI"  # a pre-Scalable Xeon


def test_cpu_from_proc_cpuinfo_alone_when_lscpu_is_missing() -> None:
    info = cpu.parse("", sample("laptop", "proc-cpuinfo.txt"))
    assert info.model_name == "12th Gen Intel(R) Core(TM) i7-1260P"
    assert (info.logical_cpus, info.sockets, info.cores_per_socket) == (16, 1, 12)
    assert info.max_mhz == 1187.554  # the current clock: all cpuinfo knows


@pytest.mark.parametrize(("name", "hint"), [
    ("server-2s", "UPI"), ("gpu-box", "Infinity Fabric (xGMI)"), ("laptop", "N/A (one socket)")])
def test_socket_interconnect_hint(name: str, hint: str) -> None:
    info = cpu.parse(sample(name, "lscpu-J.txt"))
    assert host_processor_interconnect(info) == hint


@pytest.mark.parametrize(("name", "capacity", "configuration"), [
    ("laptop", "16 GB", "2x 8 GB LPDDR5 6400 MT/s (configured 5200 MT/s)"),
    ("server-2s", "1 TB", "16x 64 GB DDR5 4800 MT/s (configured 4400 MT/s)"),
    ("gpu-box", "1.5 TB", "24x 64 GB DDR5 4800 MT/s"),
])
def test_memory_from_dmidecode(name: str, capacity: str, configuration: str) -> None:
    info = memory.parse(sample(name, "proc-meminfo.txt"), sample(name, "dmidecode-t-memory.txt"))
    assert (info.capacity_text, info.configuration_text, info.dimm_gap) == (
        capacity, configuration, None)


def test_memory_without_smbios_is_a_marked_gap() -> None:
    info = memory.parse(sample("jetson-orin", "proc-meminfo.txt"),
                        sample("jetson-orin", "dmidecode-t-memory.txt"))
    assert info.capacity_text == "61.4 GiB"  # MemTotal, what the kernel can use
    assert info.configuration_text is None
    assert info.dimm_gap and "no SMBIOS tables" in info.dimm_gap


def test_memory_gap_reason_is_kept() -> None:
    info = memory.parse(sample("lab-vm", "proc-meminfo.txt"), "",
                        gap="`dmidecode` is not installed on host 'h2'")
    assert info.capacity_text == "23.5 GiB"
    assert info.dimm_gap == "`dmidecode` is not installed on host 'h2'"


def test_dmidecode_sizes_in_mb_and_speeds_in_mhz_of_older_versions() -> None:
    text = ("Handle 0x0011, DMI type 17, 40 bytes\nMemory Device\n\tSize: 16384 MB\n"
            "\tType: DDR4\n\tSpeed: 2400 MHz\n\tConfigured Clock Speed: 2133 MHz\n\n"
            "Handle 0x0012, DMI type 17, 40 bytes\nMemory Device\n\tSize: No Module Installed\n"
            "\tType: Unknown\n")
    assert memory.parse("", text).configuration_text == (
        "1x 16 GB DDR4 2400 MT/s (configured 2133 MT/s)")


@pytest.mark.parametrize(("name", "capacity", "kinds", "drives"), [
    ("lab-vm", "274.9 GB", "virtual disk", "1x 274.9 GB virtual disk"),
    ("laptop", "512.1 GB", "NVMe SSD", "1x 512.1 GB NVMe SSD (SAMSUNG MZVL2512HCJQ-00B00)"),
    ("server-2s", "8.162 TB", "SSD + NVMe SSD",
     "1x 480.1 GB SSD (MTFDDAK480TDS), 2x 3.841 TB NVMe SSD (SAMSUNG MZQL23T8HCLS-00A07)"),
    ("gpu-box", "16.32 TB", "NVMe SSD", None),
    ("jetson-orin", "1.063 TB", "eMMC/SD + NVMe SSD",
     "1x 62.54 GB eMMC/SD, 1x 1 TB NVMe SSD (Samsung SSD 980 PRO 1TB)"),
])
def test_storage(name: str, capacity: str, kinds: str, drives: str | None) -> None:
    info = storage.parse(sample(name, "lsblk.txt"))
    assert (info.capacity_text, info.type_text) == (capacity, kinds)
    if drives:
        assert info.drives_text == drives


def test_storage_from_older_lsblk_with_strings() -> None:
    text = ('{"blockdevices": [{"name": "sda", "type": "disk", "size": "2000398934016", '
            '"rota": "1", "tran": "sata", "model": "ST2000NM0008-2F3100"}]}')
    info = storage.parse(text)
    assert (info.capacity_text, info.type_text) == ("2 TB", "HDD")


def test_nvidia_gpu_box() -> None:
    info = accelerators.parse_nvidia(sample("gpu-box", "nvidia-smi-query.txt"),
                                     sample("gpu-box", "nvidia-smi-topo.txt"))
    assert (info.vendor, len(info.devices), info.model_text) == (
        "nvidia", 8, "NVIDIA H100 80GB HBM3")
    assert (info.memory_text, info.frequency_text, info.host_interconnect_text) == (
        "80 GB", "1980 MHz", "PCIe Gen5 x16")
    assert info.links.interconnect_text == "NVLink"
    assert info.links.topology_text == "NVLink between all 8 GPUs (NV18 per pair)"
    assert info.driver == "550.54.15"


def test_nvidia_query_with_units() -> None:
    info = accelerators.parse_nvidia("NVIDIA L4, 23034 MiB, 2040 MHz, 4, 16, 550.54.15\n")
    assert (info.memory_text, info.frequency_text, info.host_interconnect_text) == (
        "22 GB", "2040 MHz", "PCIe Gen4 x16")
    assert info.links.interconnect_text == "N/A (one accelerator)"


def test_topology_space_separated_and_pcie_only() -> None:
    spaced = ("        \x1b[4mGPU0    GPU1    GPU2    CPU Affinity\x1b[0m\n"
              "GPU0     X      NV4     SYS     0-31\nGPU1    NV4      X      PHB     0-31\n"
              "GPU2    SYS     PHB      X      32-63\n")
    links = parse_nvidia_topo(spaced)
    assert (links.gpus, links.pairs, links.nvlink_pairs) == (3, 3, 1)
    assert links.topology_text == "NVLink on 1 of 3 GPU pairs (NV4), PCIe otherwise"
    pcie = parse_nvidia_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-31\n"
                             "GPU1\tPHB\t X \t0-31\n")
    assert (pcie.interconnect_text, pcie.topology_text) == ("PCIe", "PCIe between all 2 GPUs")


def test_jetson_from_jetpack6_nvidia_smi_and_device_tree() -> None:
    info = accelerators.parse_jetson(sample("jetson-orin", "device-tree-model.txt"),
                                     sample("jetson-orin", "nv_tegra_release.txt"),
                                     sample("jetson-orin", "nvidia-smi-query.txt"))
    assert (info.vendor, info.model_text, info.driver) == (
        "jetson", "NVIDIA Jetson AGX Orin integrated GPU", "L4T R36.3.0")
    assert info.shared_memory and info.host_interconnect_text == "integrated in the SoC"
    without_tree = accelerators.parse_jetson("", "", sample("jetson-orin", "nvidia-smi-query.txt"))
    assert without_tree.model_text == "NVIDIA Orin integrated GPU"


def test_no_accelerator() -> None:
    assert accelerators.parse_jetson("Raspberry Pi 4 Model B Rev 1.4\x00").vendor == "none"
    assert accelerators.parse_jetson("").devices == ()


def test_amd_rocm_smi() -> None:
    info = accelerators.parse_rocm(sample("mi300x-box", "rocm-smi.txt"))
    assert (info.vendor, len(info.devices), info.model_text) == ("amd", 8, "AMD Instinct MI300X")
    assert (info.memory_text, info.driver) == ("192 GB", "6.7.0")


@pytest.mark.parametrize(("name", "text", "count", "fastest"), [
    ("lab-vm", "1x Ethernet (virtio_net)", 1, None),
    ("laptop", "1x Wi-Fi (iwlwifi)", 1, None),
    ("server-2s", "2x 10 Gb/s Ethernet (i40e), 2x 100 Gb/s Ethernet (mlx5_core)", 4, 100000),
    ("gpu-box", "8x 400 Gb/s InfiniBand (mlx5_core), 1x 1 Gb/s Ethernet (igb)", 9, 400000),
    ("jetson-orin", "1x 10 Gb/s Ethernet (nvethernet), 1x Wi-Fi (rtl88x2ce)", 2, 10000),
])
def test_network(name: str, text: str, count: int, fastest: int | None) -> None:
    info = network.parse_sysfs(sample(name, "net-sysfs.txt"))
    assert (info.networking_text, len(info.nics), info.max_speed_mbit) == (text, count, fastest)


def test_ethtool_adds_firmware_and_speed() -> None:
    nic = network.parse_sysfs(sample("server-2s", "net-sysfs.txt")).nics[1]  # eno2, no link
    done = network.with_ethtool(nic, sample("server-2s", "ethtool-i-eno2.txt"),
                                "Settings for eno2:\n\tSpeed: 10000Mb/s\n\tDuplex: Full\n")
    assert (done.firmware, done.speed_mbit) == ("9.20 0x8000d95e 1.3353.0", 10000)


@pytest.mark.parametrize(("name", "text"), [
    ("lab-vm", "Debian GNU/Linux 12 (bookworm), kernel 6.18.44-fc-v657"),
    ("gpu-box", "Rocky Linux 9.3 (Blue Onyx), kernel 5.14.0-362.8.1.el9_3.x86_64"),
    ("jetson-orin", "Ubuntu 22.04.4 LTS, kernel 5.15.136-tegra"),
])
def test_os(name: str, text: str) -> None:
    info = osinfo.parse(sample(name, "os-release.txt"), sample(name, "uname.txt"))
    assert info.text == text


def test_machine() -> None:
    laptop = machine.parse(sample("laptop", "machine.txt"))
    assert laptop.product_text == "Dell Inc. XPS 13 9320"
    assert laptop.firmware_text == "BIOS 2.12.0 (06/11/2024)"
    assert laptop.power_management_text == "cpufreq governor powersave (intel_pstate)"
    jetson = machine.parse(sample("jetson-orin", "machine.txt"))
    assert (jetson.product_text, jetson.firmware_text) == (
        "NVIDIA Jetson AGX Orin Developer Kit", None)
    oem = machine.parse("vendor=To be filled by O.E.M.\nproduct=Default string\n")
    assert oem.product_text is None


def test_docker_engine() -> None:
    lab = docker_engine.parse(sample("lab-vm", "docker-version.txt"),
                              sample("lab-vm", "docker-info.txt"))
    assert lab.text == "Docker 20.10.24+dfsg1 (containerd 1.6.20~ds1, runc 1.1.5+ds1)"
    gpu = docker_engine.parse(sample("gpu-box", "docker-version.txt"),
                              sample("gpu-box", "docker-info.txt"))
    assert "nvidia" in gpu.runtimes and gpu.cgroup_version == "2"


def test_software_stack_of_an_ngc_image() -> None:
    stack = software.parse(sample("gpu-box", "software-probe.txt"), "nvcr.io/pytorch:24.03")
    assert stack.framework_text == "TensorRT 8.6.3, PyTorch 2.3.0a0+6ddf5cf85e.nv24.3"
    assert stack.stack_text.startswith("Python 3.10.12, mlcommons-loadgen 4.1, numpy 1.24.4")
    assert "CUDA 12.4.0.041, cuDNN 9.0.0.306" in stack.stack_text
    assert stack.stack_text.endswith("Ubuntu 22.04.4 LTS (nvcr.io/pytorch:24.03)")


def test_software_stack_without_framework() -> None:
    base = software.parse(sample("lab-vm", "software-probe.txt"), "subrun/debian:bookworm")
    assert base.framework_text == "Python 3.11.2 (no ML framework)"
    venv = software.parse(sample("lab-vm", "software-probe-venv.txt"), "host")
    assert venv.framework_text.startswith("Python 3.11.7, NumPy ")
    assert "mlcommons-loadgen 6.0.17" in venv.stack_text
    framework, stack = software.merge([base, venv])
    assert framework and framework.count(";") == 1 and stack


def test_software_probe_without_json_is_an_error() -> None:
    with pytest.raises(ValueError, match="no JSON line"):
        software.parse("python3: not found\n", "img")
