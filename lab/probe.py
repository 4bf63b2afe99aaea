"""Reachability, Docker engine, disk space and clock offset of a host: what `hosts check` shows."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lab.config import HostConfig
from lab.errors import ConnectionLost, LinkDown, SubrunError
from lab.host import Host
from lab.transport import open_host

MIN_FREE_GB = 20.0
MAX_CLOCK_OFFSET_S = 0.5
MAX_PARALLEL_PROBES = 16  # hosts probed at once (each holds an SSH connection meanwhile)


@dataclass(frozen=True)
class HostReport:
    """The outcome of probing one host; `problems` is empty when the host is fit for runs."""

    name: str
    reachable: bool
    docker: str  # server version, "absent", or why it is not usable
    free_gb: float | None
    clock_offset_s: float | None
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def probe(config: HostConfig, *, pause_s: float = 1.0) -> HostReport:
    """Connect to the host and measure what a campaign needs from it; never raises SubrunError.

    A link that drops in the middle (a command cut, a reconnection window that ran out) is a
    fault of the link, not of the host: the probe, whose commands only read, starts over until
    the host's outage budget is spent, so a flaky link delays a campaign's start instead of
    refusing it."""
    deadline = time.monotonic() + config.outage_budget_s
    while True:
        host = open_host(config)
        try:
            with host:
                return _probe_open(config, host)
        except (ConnectionLost, LinkDown) as e:
            if time.monotonic() + pause_s >= deadline:
                return _unreachable(config, e)
            time.sleep(pause_s)
        except SubrunError as e:
            return _unreachable(config, e)


def probe_all(configs: Sequence[HostConfig]) -> list[HostReport]:
    """Probe hosts side by side (each over a connection of its own), reports in their order:
    a campaign's start waits for its slowest host, not for the sum of them."""
    if len(configs) < 2:
        return [probe(config) for config in configs]
    with ThreadPoolExecutor(max_workers=min(len(configs), MAX_PARALLEL_PROBES),
                            thread_name_prefix="probe") as pool:
        return list(pool.map(probe, configs))


def _unreachable(config: HostConfig, error: SubrunError) -> HostReport:
    return HostReport(config.name, False, "?", None, None, (str(error),))


def _probe_open(config: HostConfig, host: Host) -> HostReport:
    problems: list[str] = []
    host.makedirs(config.work_dir)
    docker = docker_version(config, host)
    if config.docker.engine and not docker[0].isdigit():
        problems.append(f"host '{config.name}': Docker engine not usable ({docker}); start "
                        "dockerd or set `docker: {engine: false}` for native runs")
    free_gb = free_space_gb(host, config.work_dir)
    if free_gb is not None and free_gb < MIN_FREE_GB:
        problems.append(f"host '{config.name}': only {free_gb:.1f} GB free in "
                        f"{config.work_dir}; images and logs want at least {MIN_FREE_GB:.0f} GB")
    offset = clock_offset_s(host)
    if offset is not None and abs(offset) > MAX_CLOCK_OFFSET_S:
        problems.append(f"host '{config.name}': clock is {offset:+.3f} s off the controller; "
                        "power runs need NTP-synchronised clocks")
    return HostReport(config.name, True, docker, free_gb, offset, tuple(problems))


def docker_version(config: HostConfig, host: Host) -> str:
    """The engine's server version, or a short reason it is not there."""
    if not config.docker.engine:
        return "not used"
    env = {"DOCKER_HOST": config.docker.docker_host} if config.docker.docker_host else None
    result = host.run(["docker", "version", "--format", "{{.Server.Version}}"],
                      check=False, timeout_s=30, env=env)
    if result.ok and result.stdout.strip():
        return result.stdout.strip()
    if result.exit_status == 127:
        return "no docker CLI"
    return "engine not answering"


def free_space_gb(host: Host, path: str) -> float | None:
    """Free space of the filesystem holding path, in GB (10^9 bytes)."""
    free = host.free_bytes(path)
    return None if free is None else free / 1e9


def clock_offset_s(host: Host) -> float | None:
    """Target clock minus controller clock, judged at the midpoint of the round trip."""
    before = time.time()
    result = host.run(["date", "+%s.%N"], check=False, timeout_s=30)
    after = time.time()
    try:
        return float(result.stdout.strip()) - (before + after) / 2
    except ValueError:
        return None
