"""subrun's daemon as a long-lived process on the analyzer's host, reached through Host.

`ensure_daemon` finds the daemon started earlier for an analyzer (a detached process named
`power-daemon-<analyzer>`), checks it answers and that its analyzer still reads, and starts or
restarts it when not: so a daemon that died, or whose analyzer was unplugged and plugged back,
is picked up by the next run. A busy daemon (serving another client) is never restarted.
"""

from __future__ import annotations

import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import PurePosixPath

from lab.config import AnalyzerConfig, HostConfig
from lab.errors import PowerError
from lab.host import Detached, Host
from lab.local import LocalHost
from power.client import Identity, PtdClient
from power.instrument import MODELS

START_TIMEOUT_S = 30.0


class DaemonBusy(PowerError):
    """The daemon answers but serves another client."""


@dataclass(frozen=True)
class DaemonEndpoint:
    """A running daemon: where it listens and how to read its console."""

    analyzer: AnalyzerConfig
    host: Host
    address: str
    handle: Detached
    log_path: str  # the -l sample log on the daemon's host
    identity: Identity  # what the daemon said when last probed

    @property
    def port(self) -> int:
        return self.analyzer.port

    def console(self) -> str:
        """Everything the daemon printed so far (its PTDaemon-style console)."""
        return self.host.detached_log(self.handle)

    def sample_log(self) -> str:
        """The daemon's `-l` sample log, flushed line by line."""
        return self.host.read_text(self.log_path)


def daemon_address(analyzer: AnalyzerConfig, host: HostConfig) -> str:
    """Where the controller reaches the analyzer's daemon."""
    if analyzer.address:
        return analyzer.address
    if host.transport == "local":
        return "127.0.0.1"
    if host.address:
        return host.address
    raise PowerError(f"Analyzer '{analyzer.name}' runs on host '{host.name}', which has no "
                     "`address:`; set `address:` on the analyzer in hosts.yaml.")


def daemon_argv(analyzer: AnalyzerConfig, *, python: str, address: str,
                log_path: str) -> list[str]:
    """The PTDaemon-style command line that starts subrun's daemon for analyzer."""
    device_port = f"sim:{analyzer.model}" if analyzer.resource == "sim" else analyzer.resource
    argv = [python, "-m", "power.daemon", "-l", log_path, "-p", str(analyzer.port),
            "--bind", address]
    if analyzer.sim_file:
        argv += ["--sim-file", str(analyzer.sim_file)]
    if analyzer.visa_library:
        argv += ["--visa-library", analyzer.visa_library]
    return [*argv, str(device_type(analyzer)), device_port]


def device_type(analyzer: AnalyzerConfig) -> int:
    """PTDaemon's device type number for the analyzer (49 WT310/WT310E, 52 WT333E)."""
    return analyzer.device_type or MODELS[analyzer.model].device_types[0]


def launcher_script(python: str) -> str:
    """A `ptd` executable for power-dev's server that starts subrun's daemon (dry runs only)."""
    return f"#!/bin/sh\nexec {shlex.quote(python)} -m power.daemon \"$@\"\n"


def probe(address: str, port: int, timeout_s: float = 10.0) -> Identity:
    """Connect, identify, and read one value; raises DaemonBusy or PowerError."""
    client = PtdClient(address, port, timeout_s)
    try:
        identity = client.connect()
    except PowerError as e:
        if "one client at a time" in str(e):
            raise DaemonBusy(str(e)) from e
        raise
    try:
        watts = client.command("Watts")
        if not watts.startswith("Watts,"):
            raise PowerError(f"The daemon at {address}:{port} is up but its analyzer does not "
                             f"read: {watts}")
        return identity
    finally:
        client.close()


def ensure_daemon(host: Host, analyzer: AnalyzerConfig, *, address: str,
                  python: str | None = None) -> DaemonEndpoint:
    """A healthy daemon for analyzer on host: the running one, or a fresh one."""
    name = f"power-daemon-{analyzer.name}"
    log_path = str(PurePosixPath(host.work_dir) / "power" / analyzer.name / "samples.log")
    handle = host.find_detached(name)
    if handle is not None and host.poll_detached(handle).running:
        try:
            identity = probe(address, analyzer.port)
            return DaemonEndpoint(analyzer, host, address, handle, log_path, identity)
        except DaemonBusy:
            raise
        except PowerError:
            stop_daemon(host, handle)  # alive but unwell (analyzer lost): start afresh
    if _listening(address, analyzer.port):
        raise PowerError(
            f"Port {analyzer.port} on {address} is served by a process subrun did not start for "
            f"analyzer '{analyzer.name}' on host '{host.name}' (another daemon, or another "
            f"inventory's analyzer on the same port): its samples would not reach "
            f"{log_path}. Stop that process, or give the analyzer another `port:` in hosts.yaml.")
    interpreter = python or analyzer.python or (
        sys.executable if isinstance(host, LocalHost) else "python3")
    host.makedirs(str(PurePosixPath(log_path).parent))
    argv = daemon_argv(analyzer, python=interpreter, address=address, log_path=log_path)
    handle = host.start_detached(argv, name=name)
    identity = _wait_ready(host, handle, address, analyzer.port)
    return DaemonEndpoint(analyzer, host, address, handle, log_path, identity)


def stop_daemon(host: Host, handle: Detached, timeout_s: float = 15.0) -> None:
    """Stop the daemon (SIGTERM, then SIGKILL after timeout_s)."""
    host.stop_detached(handle)
    if host.wait_detached(handle, timeout_s=timeout_s).running:
        host.stop_detached(handle, signal="KILL")
        host.wait_detached(handle, timeout_s=5)


def _listening(address: str, port: int) -> bool:
    """Whether something already accepts connections on address:port."""
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def _wait_ready(host: Host, handle: Detached, address: str, port: int) -> Identity:
    deadline = time.monotonic() + START_TIMEOUT_S
    last: PowerError | None = None
    while time.monotonic() < deadline:
        status = host.poll_detached(handle)
        if not status.running:
            tail = "\n".join(host.detached_log(handle).splitlines()[-10:])
            raise PowerError(f"subrun's power daemon on host '{host.name}' exited with status "
                             f"{status.exit_status} while starting:\n{tail}")
        try:
            identity = probe(address, port, timeout_s=5)
        except PowerError as e:
            last = e
            time.sleep(0.2)
            continue
        if host.poll_detached(handle).running:  # the answer came from the daemon just started
            return identity
    status = host.poll_detached(handle)
    if not status.running:
        tail = "\n".join(host.detached_log(handle).splitlines()[-10:])
        raise PowerError(f"subrun's power daemon on host '{host.name}' exited with status "
                         f"{status.exit_status} while starting:\n{tail}")
    stop_daemon(host, handle)
    raise PowerError(f"subrun's power daemon on host '{host.name}' did not answer on "
                     f"{address}:{port} within {START_TIMEOUT_S:g} s ({last}).")
