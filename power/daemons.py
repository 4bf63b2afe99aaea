"""The analyzer daemons campaigns left running, seen and stopped from the controller.

A campaign starts subrun's daemon for an analyzer on the analyzer's host (`power-daemon-<name>`,
power.service) and leaves it running: the next campaign reuses it instead of paying its start
and its analyzer's warm-up. A power-dev server (`power-server-<name>`, power.powerdev) lives on
the director only for one official run, but one outlives a controller killed mid-run. This module
lists both for every analyzer of an inventory and stops them, so a person can see what listens
on an analyzer's port and end it (`subrun power status|stop`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from lab.config import AnalyzerConfig, HostConfig, Inventory
from lab.errors import ConfigError, SubrunError
from lab.host import Detached, Host
from lab.transport import open_host
from power.director import director_address
from power.powerdev import server_name
from power.service import daemon_address, daemon_name, stop_daemon


@dataclass(frozen=True)
class DaemonState:
    """One analyzer process subrun may have started, as its host reports it now."""

    analyzer: str
    kind: str  # "daemon" (subrun's, on the analyzer's host) or "power-dev server" (director)
    host: str
    endpoint: str  # where it listens, as hosts.yaml says
    handle: Detached | None  # None: never started on that host (or its record was removed)
    running: bool
    problem: str = ""  # the host could not be asked

    @property
    def state(self) -> str:
        if self.problem:
            return "unknown"
        if self.handle is None:
            return "not started"
        return f"running (pid {self.handle.pid})" if self.running else "stopped"


def _places(inventory: Inventory, analyzer: AnalyzerConfig
            ) -> Iterator[tuple[str, HostConfig, str, str]]:
    """(kind, host, process name, endpoint) of each process subrun starts for analyzer."""
    host = inventory.host(analyzer.host)
    try:
        endpoint = f"{daemon_address(analyzer, host)}:{analyzer.port}"
    except SubrunError:
        endpoint = f"{analyzer.listen}:{analyzer.port}"
    yield "daemon", host, daemon_name(analyzer.name), endpoint
    director = inventory.director
    if director is not None and director.power_dev:
        yield ("power-dev server", inventory.host(director.host), server_name(analyzer.name),
               f"{director_address(inventory)}:{director.port}")


def daemon_states(inventory: Inventory, names: list[str] | None = None) -> list[DaemonState]:
    """Every analyzer process of the inventory (or of the analyzers named), one connection per
    host; a host that cannot be asked is reported as a problem, not raised."""
    states: list[DaemonState] = []
    hosts: dict[str, Host] = {}
    try:
        for analyzer in _chosen(inventory, names):
            for kind, config, name, endpoint in _places(inventory, analyzer):
                try:
                    if config.name not in hosts:
                        hosts[config.name] = open_host(config)
                    host = hosts[config.name]
                    handle = host.find_detached(name)
                    running = handle is not None and host.poll_detached(handle).running
                    states.append(DaemonState(analyzer.name, kind, config.name, endpoint,
                                              handle, running))
                except SubrunError as e:
                    states.append(DaemonState(analyzer.name, kind, config.name, endpoint, None,
                                              False, problem=str(e)))
    finally:
        for host in hosts.values():
            host.close()
    return states


def stop_daemons(inventory: Inventory, names: list[str] | None = None) -> list[DaemonState]:
    """Stop every running analyzer process of the inventory (or of the analyzers named);
    returns the ones stopped. SIGTERM, then SIGKILL if one does not end."""
    stopped = []
    for state in daemon_states(inventory, names):
        if state.problem:
            raise SubrunError(f"Host '{state.host}' of analyzer '{state.analyzer}' could not "
                              f"be asked whether its {state.kind} runs, so nothing was stopped: "
                              f"{state.problem} (`subrun hosts check` tells what the host "
                              "lacks); try again once it answers.")
        if state.running and state.handle is not None:
            host = open_host(inventory.host(state.host))
            try:
                stop_daemon(host, state.handle)
            finally:
                host.close()
            stopped.append(state)
    return stopped


def _chosen(inventory: Inventory, names: list[str] | None) -> list[AnalyzerConfig]:
    if not names:
        return list(inventory.analyzers)
    known = {a.name: a for a in inventory.analyzers}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"No analyzer named {', '.join(repr(n) for n in unknown)} in "
                          f"hosts.yaml (known: {', '.join(known) or 'none'}); name one of "
                          "its `analyzers:`.")
    return [known[n] for n in names]
