"""subrun's daemon as a long-lived process on the analyzer's host, reached through Host.

`ensure_daemon` finds the daemon started earlier for an analyzer (a detached process named
`power-daemon-<analyzer>`), checks it answers and that its analyzer still reads, and starts or
restarts it when not: so a daemon that died, or whose analyzer was unplugged and plugged back,
is picked up by the next run. A daemon that has no room for another client is never restarted.

The daemon listens on the analyzer's `listen:` (loopback by default). When the analyzer has a
token, it is written to a file only its owner can read on the daemon's host (sent on stdin,
never on a command line) and the controller sends it as its first command. The daemon's
console goes to a capped file beside its sample log; both are read back in bounded memory
(`power.daemon_logs`).
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from lab.config import AnalyzerConfig, HostConfig
from lab.errors import ConfigError, PowerError
from lab.host import Detached, Host
from lab.local import LocalHost
from power import daemon_logs
from power.access import is_loopback
from power.client import Identity, PtdClient
from power.daemon import BUSY
from power.instrument import MODELS
from power.protocol import Sample

START_TIMEOUT_S = 30.0


class DaemonBusy(PowerError):
    """The daemon answers but has no room for another client."""


@dataclass(frozen=True)
class DaemonEndpoint:
    """A running daemon: where it listens, how to authenticate, and how to read its logs."""

    analyzer: AnalyzerConfig
    host: Host
    address: str
    handle: Detached
    log_path: str  # the -l sample log on the daemon's host
    identity: Identity  # what the daemon said when last probed
    token: str | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return self.analyzer.port

    @property
    def console_path(self) -> str:
        """The daemon's capped console file on its host."""
        return console_path(self.log_path)

    def copy_console(self, dest: Path) -> None:
        """The daemon's PTDaemon-style console so far into the local file dest."""
        daemon_logs.copy_console(self.host, self.console_path, dest)

    def samples(self, mark: str, keep: daemon_logs.SampleFilter | None = None) -> list[Sample]:
        """The samples of the daemon's `-l` log marked mark (and accepted by keep)."""
        return daemon_logs.marked_samples(self.host, self.log_path, mark, keep)


def console_path(log_path: str) -> str:
    """Where the daemon whose sample log is log_path writes its console."""
    return str(PurePosixPath(log_path).with_name("console.log"))


def daemon_address(analyzer: AnalyzerConfig, host: HostConfig) -> str:
    """Where the controller reaches the analyzer's daemon."""
    if analyzer.address:
        return analyzer.address
    if not ipaddress.ip_address(analyzer.listen).is_unspecified:
        if is_loopback(analyzer.listen) and host.transport == "ssh" and not (
                host.address and is_loopback(host.address)):
            raise PowerError(
                f"Analyzer '{analyzer.name}' runs on host '{host.name}', but its daemon listens "
                f"on {analyzer.listen} (`listen:`, loopback by default), which only that host "
                "can reach. Set `listen:` on the analyzer in hosts.yaml to an address of "
                f"'{host.name}' the controller reaches, with `token_env:` or `token_file:`.")
        return analyzer.listen
    if host.transport == "local":
        return "127.0.0.1"
    if host.address:
        return host.address
    raise PowerError(f"Analyzer '{analyzer.name}' runs on host '{host.name}', which has no "
                     "`address:`; set `address:` on the analyzer in hosts.yaml.")


def daemon_argv(analyzer: AnalyzerConfig, *, python: str, log_path: str,
                token_file: str | None = None) -> list[str]:
    """The PTDaemon-style command line that starts subrun's daemon for analyzer."""
    device_port = f"sim:{analyzer.model}" if analyzer.resource == "sim" else analyzer.resource
    argv = [python, "-m", "power.daemon", "-l", log_path, "-p", str(analyzer.port),
            "--bind", analyzer.listen, "--idle-timeout", f"{analyzer.idle_timeout_s:g}",
            "--console-log", console_path(log_path)]
    if token_file:
        argv += ["--token-file", token_file]
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


def probe(address: str, port: int, timeout_s: float = 10.0,
          token: str | None = None) -> Identity:
    """Connect, identify, and read one value; raises DaemonBusy or PowerError."""
    client = PtdClient(address, port, timeout_s, token=token)
    try:
        identity = client.connect()
    except PowerError as e:
        if BUSY in str(e):
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


def daemon_name(analyzer: str) -> str:
    """The detached process name of the analyzer's daemon on its host."""
    return f"power-daemon-{analyzer}"


def ensure_daemon(host: Host, analyzer: AnalyzerConfig, *, address: str,
                  python: str | None = None) -> DaemonEndpoint:
    """A healthy daemon for analyzer on host: the running one, or a fresh one."""
    name = daemon_name(analyzer.name)
    folder = PurePosixPath(host.work_dir) / "power" / analyzer.name
    log_path = str(folder / "samples.log")
    try:
        token = analyzer.token()
    except ConfigError as e:
        raise PowerError(str(e)) from e
    handle = host.find_detached(name)
    if handle is not None and host.poll_detached(handle).running:
        try:
            identity = probe(address, analyzer.port, token=token)
            return DaemonEndpoint(analyzer, host, address, handle, log_path, identity, token)
        except DaemonBusy:
            raise
        except PowerError:
            stop_daemon(host, handle)  # alive but unwell (analyzer lost, old token): afresh
    if _listening(address, analyzer.port):
        raise PowerError(
            f"Port {analyzer.port} on {address} is served by a process subrun did not start for "
            f"analyzer '{analyzer.name}' on host '{host.name}' (another daemon, or another "
            f"inventory's analyzer on the same port): its samples would not reach "
            f"{log_path}. Stop that process, or give the analyzer another `port:` in hosts.yaml.")
    interpreter = python or analyzer.python or (
        sys.executable if isinstance(host, LocalHost) else "python3")
    host.makedirs(str(folder))
    token_file = _write_token(host, str(folder / "token"), token) if token else None
    argv = daemon_argv(analyzer, python=interpreter, log_path=log_path, token_file=token_file)
    handle = host.start_detached(argv, name=name)
    identity = _wait_ready(host, handle, address, analyzer.port, token,
                          console_path(log_path))
    return DaemonEndpoint(analyzer, host, address, handle, log_path, identity, token)


def _write_token(host: Host, path: str, token: str) -> str:
    """The token into a file only its owner reads, through stdin (never on a command line)."""
    host.run(["sh", "-c", 'umask 077 && cat > "$1.tmp" && mv "$1.tmp" "$1"', "sh", path],
             stdin=token.encode() + b"\n", timeout_s=30)
    return path


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


def _wait_ready(host: Host, handle: Detached, address: str, port: int,
                token: str | None, console: str) -> Identity:
    deadline = time.monotonic() + START_TIMEOUT_S
    last: PowerError | None = None
    while time.monotonic() < deadline:
        status = host.poll_detached(handle)
        if not status.running:
            raise _exited(host, handle, status.exit_status, console)
        try:
            identity = probe(address, port, timeout_s=5, token=token)
        except PowerError as e:
            last = e
            time.sleep(0.2)
            continue
        if host.poll_detached(handle).running:  # the answer came from the daemon just started
            return identity
    status = host.poll_detached(handle)
    if not status.running:
        raise _exited(host, handle, status.exit_status, console)
    stop_daemon(host, handle)
    raise PowerError(f"subrun's power daemon on host '{host.name}' did not answer on "
                     f"{address}:{port} within {START_TIMEOUT_S:g} s ({last}).")


def _exited(host: Host, handle: Detached, exit_status: int | None,
            console: str) -> PowerError:
    """Why the daemon ended while starting: the end of its console and of its stderr."""
    tail = daemon_logs.console_tail(host, [console, handle.log_path])
    return PowerError(f"subrun's power daemon on host '{host.name}' exited with status "
                      f"{exit_status} while starting:\n{tail}")
