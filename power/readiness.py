"""Refuse an official power campaign before any run, with the hosts.yaml key to set.

An official power run needs a director (hosts.yaml `director:`) with a verified power-dev
checkout, a PTDaemon that power-dev's server can start and reach, an NTP server, and the same
power-dev checkout on the controller and on each host that runs power. Finding out at the first
power run, after an hour of performance runs, would waste the campaign; so the campaign checks
all of it first, starting power-dev's server once as a probe.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from lab.config import Inventory
from lab.errors import ConfigError, PowerError, SubrunError
from lab.host import Host
from lab.local import LocalHost
from lab.transport import open_host
from power.director import server_plan
from power.lock import analyzer_lock
from power.measure import find_analyzer
from power.powerdev import start_power_server, stop_power_server, verify_checkout

DIRECTOR_EXAMPLE = ("director: {host: NAME, power_dev: /opt/power-dev, "
                    "ptd: /opt/ptd/ptd-linux-x86, ntp_server: ADDRESS}")
TRACK = ("or set `power: track` in the campaign to measure with subrun's own daemon (never "
         "submittable)")


def client_checkout(inventory: Inventory, campaign_power_dev: Path | None) -> Path | None:
    """The power-dev checkout power-dev's client and check run from: the campaign's
    `power_dev:`, else the director's `power_dev:` path."""
    if campaign_power_dev is not None:
        return campaign_power_dev
    director = inventory.director
    return Path(director.power_dev) if director and director.power_dev else None


def check_official(inventory: Inventory, where: Path, analyzer: str | None, hosts: list[str],
                   checkout: Path | None, *,
                   host_of: Callable[[str], Host] | None = None) -> str:
    """Raise ConfigError naming the key to set unless official power can run; else a note."""
    director = inventory.director
    if director is None:
        _refuse(where, "hosts.yaml has no `director:`", f"add `{DIRECTOR_EXAMPLE}`")
    assert director is not None
    missing = [k for k in ("power_dev", "ptd", "ntp_server") if not getattr(director, k)]
    if missing:
        _refuse(where, f"`director:` lacks {', '.join(missing)}",
                "set " + ", ".join(f"`director.{k}`" for k in missing))
    if analyzer is None:
        _refuse(where, "`analyzers:` is empty", "add the analyzer PTDaemon drives under "
                "`analyzers:` (its `model:`, `device_type:` and `device_port:`)")
    assert analyzer is not None and checkout is not None
    for name in hosts:
        if not inventory.host(name).docker.engine:
            _refuse(where, f"host '{name}' has no Docker engine, and power-dev's client runs in "
                    "the benchmark's container", f"set `hosts[{name}].docker.engine: true`")
    opened = host_of or (lambda name: open_host(inventory.host(name)))
    director_host = opened(director.host)
    _verify(where, director_host, str(director.power_dev), director.python, "director.power_dev")
    controller = LocalHost("controller", str(checkout))
    _verify(where, controller, str(checkout), sys.executable, "power_dev (campaign)")
    for name in hosts:
        _verify(where, opened(name), str(checkout), "python3", "power_dev (campaign)")
    _probe(where, inventory, analyzer, director_host)
    return (f"official power: power-dev at {director.power_dev} on '{director.host}' "
            f"reached PTDaemon; checkout {checkout} verified on the controller and "
            f"{', '.join(hosts)}")


def _verify(where: Path, host: Host, checkout: str, python: str, key: str) -> None:
    try:
        verify_checkout(host, checkout, python)
    except SubrunError as e:
        _refuse(where, f"the power-dev checkout is not usable: {e}",
                f"set `{key}` to an unmodified checkout of mlcommons/power-dev at the "
                "round's commit")


def _probe(where: Path, inventory: Inventory, analyzer: str, director: Host) -> None:
    """Start power-dev's server once (it starts PTDaemon and asks it to Identify), then stop."""
    config = find_analyzer(inventory, analyzer)
    try:
        with analyzer_lock(config.name, "plan-check", timeout_s=0.0):
            server = start_power_server(director, server_plan(inventory, config))
            stop_power_server(server)
    except PowerError as e:
        if "is in use" in str(e) or "held by" in str(e):
            return  # another run measures with it right now: it answers
        _refuse(where, f"power-dev's server could not reach PTDaemon: {_one_line(str(e))}",
                "set `director.ptd` to the SPEC PTDaemon binary, and the analyzer's "
                "`port:`, `device_type:` and `device_port:` to what it needs")


def _one_line(error: str) -> str:
    """The error's first line and the server's first logged error (the paragraph stays one)."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    logged = next((line.split("[ERROR]", 1)[1].strip() for line in lines if "[ERROR]" in line),
                  "")
    head = lines[0].rstrip(":") if lines else error
    return f"{head} ({logged})" if logged else head


def _refuse(where: Path, problem: str, fix: str) -> None:
    raise ConfigError(
        f"{where}: the campaign asks for official power (`power: official`, or `power: true` in "
        f"submission mode), but {problem}. Official power runs need power-dev's server on the "
        "director host with SPEC PTDaemon, and the same verified power-dev checkout on the "
        f"controller and on each host that runs power. To fix it, {fix}; {TRACK}.")
