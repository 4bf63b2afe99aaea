"""The cores a run measures: core lists, `auto`, and keeping the controller off a SUT's cores.

Where the controller, its Prefect API and the SUT share a machine, the SUT's runs get cores of
their own (hosts.yaml `docker: {cpuset: ...}` or `native: {cpuset: ...}`): a container is
started with `--cpuset-cpus`, a native harness under `taskset -c`, and `subrun run` moves itself
(and the processes it starts afterwards) off those cores. `auto` is every core but core 0 on a
host with at least two; on a single core there is nothing to share out and runs are not pinned.
A host's core count is what its `nproc --all` says, asked once per connection and only for a
pinned host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lab.errors import ConfigError

if TYPE_CHECKING:
    from lab.config import HostConfig, Inventory
    from lab.host import Host

log = logging.getLogger("subrun.cores")
AUTO = "auto"
MAX_CORE = 65535  # far beyond any machine: a larger number is a typing slip
CpuSetting = str | int | Sequence[int]


def cores_of(value: CpuSetting) -> tuple[int, ...]:
    """The cores a list names ("1", "1-3", "0,2-3", or a list of ints), sorted, each once;
    ValueError saying what is wrong otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a core list; give e.g. \"1-3\", [1, 2, 3] or auto")
    if isinstance(value, int):
        return _checked([value])
    if isinstance(value, str):
        return _checked(_parse(value))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{list(value)!r} must be a list of core numbers, e.g. [1, 2, 3]")
    return _checked(list(value))


def _parse(text: str) -> list[int]:
    cores: list[int] = []
    for part in text.replace(" ", "").split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{text!r} is not a core list; give core numbers and ranges "
                             "separated by commas, e.g. \"1-3\" or \"0,2-3\", or auto")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"the range {part!r} in {text!r} runs backwards; write {last}-{first}")
        if last > MAX_CORE:
            raise ValueError(f"core {last} in {text!r} is beyond any machine's cores")
        cores += range(first, last + 1)
    return cores


def _checked(cores: list[int]) -> tuple[int, ...]:
    if not cores:
        raise ValueError("an empty core list pins runs to no core; name at least one, or "
                         "remove `cpuset:` to leave runs unpinned")
    bad = [c for c in cores if not 0 <= c <= MAX_CORE]
    if bad:
        raise ValueError(f"core {bad[0]} is not a core number (0 to the host's last core)")
    return tuple(sorted(set(cores)))


def core_list(cores: Iterable[int]) -> str:
    """cores written as a core list ("0,2-3"), as taskset, docker and the kernel write them."""
    parts: list[str] = []
    ordered = sorted(set(cores))
    start = prev = None
    for core in [*ordered, None]:
        if core is not None and prev is not None and core == prev + 1:
            prev = core
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = core
    return ",".join(parts)


def normalized(value: CpuSetting) -> str:
    """A hosts.yaml `cpuset:` value as stored: `auto`, or its canonical core list."""
    if isinstance(value, str) and value.strip() == AUTO:
        return AUTO
    return core_list(cores_of(value))


def auto_cores(host_cores: int) -> tuple[int, ...]:
    """`auto`: every core but core 0 (left to the system and the controller) when the host has
    at least two; none, so no pinning, on one."""
    return tuple(range(1, host_cores)) if host_cores >= 2 else ()


def resolve(setting: str | None, host_cores: int, *, host: str = "?",
            field: str = "docker.cpuset", source: str | Path = "hosts.yaml") -> tuple[int, ...]:
    """The cores a setting pins runs to on a host with host_cores cores (() for none);
    a ConfigError naming the file, host, field and fix for a core the host lacks."""
    if setting is None:
        return ()
    if setting == AUTO:
        return auto_cores(host_cores)
    cores = cores_of(setting)
    if cores[-1] >= host_cores:
        have = core_list(range(host_cores)) or "none"
        raise ConfigError(
            f"{source}: host '{host}' pins its runs to cores {core_list(cores)} (`{field}`), "
            f"but it has {host_cores} core(s), numbered {have}; set `{field}` to cores among "
            f"{have}, or to `auto` (every core but core 0).")
    return cores


def setting_of(config: HostConfig) -> tuple[str | None, str]:
    """The cpuset setting runs on this host start under, and the field it is written in."""
    if config.docker.engine:
        return config.docker.cpuset, "docker.cpuset"
    return config.native.cpuset, "native.cpuset"


_COUNTS: weakref.WeakKeyDictionary[Host, int] = weakref.WeakKeyDictionary()


def host_cores(host: Host) -> int:
    """How many cores the host has (`nproc --all`), asked once per connection."""
    count = _COUNTS.get(host)
    if count is None:
        out = host.run(["nproc", "--all"], timeout_s=30).stdout.strip()
        if not out.isdigit() or int(out) < 1:
            raise ConfigError(f"Host '{host.name}' answered `nproc --all` with {out!r}, not a "
                              "core count, so its `cpuset:` cannot be checked; remove `cpuset:` "
                              "for it, or install coreutils there.")
        count = _COUNTS[host] = int(out)
    return count


def pinned_cores(host: Host, setting: str | None, *, field: str,
                 source: str | Path = "hosts.yaml") -> tuple[int, ...]:
    """The cores runs on host are pinned to under setting; () (and no command run) unpinned."""
    if setting is None:
        return ()
    return resolve(setting, host_cores(host), host=host.name, field=field, source=source)


def run_cores(host: Host, config: HostConfig, source: str | Path = "hosts.yaml"
              ) -> tuple[int, ...]:
    """The cores the runs on a host are pinned to, by its hosts.yaml entry (() unpinned)."""
    setting, field = setting_of(config)
    return pinned_cores(host, setting, field=field, source=source)


def local_run_cores(inventory: Inventory, source: str | Path = "hosts.yaml") -> tuple[int, ...]:
    """Every core a `transport: local` host pins its runs to: the ones this machine's own
    processes (the controller, its Prefect API) should keep off."""
    count = os.cpu_count() or 1  # what `nproc --all` says here
    cores: set[int] = set()
    for config in inventory.hosts:
        if config.transport == "local":
            setting, field = setting_of(config)
            cores.update(resolve(setting, count, host=config.name, field=field, source=source))
    return tuple(sorted(cores))


def taskset_argv(cores: Sequence[int], argv: Sequence[str]) -> list[str]:
    """argv started on cores only (unchanged when cores is empty)."""
    return ["taskset", "-c", core_list(cores), *argv] if cores else list(argv)


def keep_off(cores: Iterable[int]) -> tuple[int, ...]:
    """Move this process's threads, and so the processes it starts afterwards, off cores; the
    cores it now runs on, or () when it was left as it was (already off them, nothing else to
    run on, or no CPU affinity on this system)."""
    avoid = set(cores)
    if not avoid or not hasattr(os, "sched_setaffinity"):
        return ()
    allowed = os.sched_getaffinity(0)
    rest = allowed - avoid
    if rest == allowed:
        return ()
    if not rest:
        log.warning("every core this process may use (%s) is pinned to runs; it stays there",
                    core_list(allowed))
        return ()
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, rest)
    return tuple(sorted(rest))


def _threads() -> list[int]:
    """This process's threads (a new one inherits the affinity of the thread starting it)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()]
    except OSError:
        return [0]
