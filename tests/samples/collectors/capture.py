"""Capture the raw output of every collector command on a host, as parser test samples.

    .venv/bin/python tests/samples/collectors/capture.py OUT_DIR [HOST] [--inventory FILE]
        [--image IMAGE]

Runs exactly the commands the collectors run (through the same Host contract) and writes one
file per command into OUT_DIR; a command that fails or is not installed writes no file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

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
from collectors.command import run_probe
from collectors.interconnect import NVIDIA_TOPO
from lab.config import load_inventory
from lab.docker import Engine
from lab.transport import open_host

COMMANDS = {
    "lscpu-J.txt": cpu.LSCPU,
    "proc-cpuinfo.txt": cpu.CPUINFO,
    "proc-meminfo.txt": memory.MEMINFO,
    "dmidecode-t-memory.txt": memory.DMIDECODE,
    "lsblk.txt": storage.LSBLK,
    "nvidia-smi-query.txt": accelerators.NVIDIA_QUERY,
    "nvidia-smi-topo.txt": NVIDIA_TOPO,
    "rocm-smi.txt": accelerators.ROCM_SMI,
    "device-tree-model.txt": accelerators.DT_MODEL,
    "nv_tegra_release.txt": accelerators.TEGRA_RELEASE,
    "net-sysfs.txt": network.SYSFS,
    "os-release.txt": osinfo.OS_RELEASE,
    "uname.txt": osinfo.UNAME,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("host", nargs="?", default="local")
    parser.add_argument("--inventory", type=Path)
    parser.add_argument("--image")
    args = parser.parse_args()
    config = load_inventory(args.inventory).host(args.host)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    env = {"DOCKER_HOST": config.docker.docker_host} if config.docker.docker_host else None
    with open_host(config) as host:
        commands = dict(COMMANDS)
        commands["machine.txt"] = ("sh", "-c", machine.SCRIPT, "sh", config.work_dir)
        commands["docker-version.txt"] = docker_engine.VERSION
        commands["docker-info.txt"] = docker_engine.INFO
        for name, argv in commands.items():
            result = run_probe(host, argv, env=env if name.startswith("docker") else None)
            if result.ok:
                (args.out_dir / name).write_text(result.stdout)
            print(f"{name:28} exit {result.exit_status}")
        for nic in network.parse_sysfs((args.out_dir / "net-sysfs.txt").read_text()).nics:
            result = run_probe(host, (network.ETHTOOL, "-i", nic.name))
            if result.ok:
                (args.out_dir / f"ethtool-i-{nic.name}.txt").write_text(result.stdout)
        if args.image:
            result = Engine(host, config.docker).oneshot(args.image, software.PROBE_ARGV,
                                                         software.PROBE_TIMEOUT_S)
            (args.out_dir / "software-probe.txt").write_text(result.stdout)


if __name__ == "__main__":
    main()
