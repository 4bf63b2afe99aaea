"""subrun's PTDaemon-protocol daemon: a TCP server in front of one analyzer.

It takes PTDaemon's command line, so power-dev's unmodified server can start it in place of
SPEC PTDaemon:

    python -m power.daemon -l <sample log> -p <port> [-b N] [-c CH] [-g|-n|-y|-U]
                           [--bind ADDR] [--token-file F] [--trust CIDR ...]
                           [--idle-timeout S] [--console-log F [--console-max-bytes N]]
                           [--sim-file YAML] [--visa-library LIB]
                           <device type> <device port>

device type 49 is a WT310/WT310E, 52 a WT333E; device port is a VISA resource string, an
instrument serial number (with -y), `sim` (the shipped pyvisa-sim model for the type) or
`sim:<model>`. It answers the commands power-dev sends with the replies it checks, plus
`Load,busy|idle` (subrun's load hint for a simulated instrument) and `Auth,<token>`. It says
honestly what it is: its Identify reply carries `version=<subrun version>-subrun-not-SPEC-
PTDaemon`, so results it measured never pass as SPEC PTDaemon's.

It listens on 127.0.0.1 unless told otherwise, and never beyond loopback without a token. Who
may connect and who may change the measurement is `power.access`: several clients may be
connected, one holds the measurement session. A client silent for `--idle-timeout` seconds is
dropped, unless it holds the session while a measurement runs (power-dev's server waits out a
whole LoadGen run in silence); a peer that vanished is found by TCP keepalive. The console goes
to stdout (power-dev captures it) or to a capped file. It exits cleanly on SIGTERM or SIGINT.
"""

from __future__ import annotations

import contextlib
import platform
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from types import FrameType

from lab.errors import PowerError
from power import access
from power.access import AccessPolicy, SessionBook, parse_networks, read_token_file
from power.commands import dispatch
from power.console_file import RotatingConsoleFile
from power.daemon_options import DaemonOptions, parse_args
from power.instrument import Analyzer, open_analyzer
from power.listener import keepalive, listen
from power.meter import Console, Meter, SampleLog, Stream
from power.protocol import Command, LineSocket

__all__ = ["Daemon", "DaemonOptions", "main", "parse_args"]
MAX_CLIENTS = 8
BUSY = "serves at most"  # in the refusal when MAX_CLIENTS are connected
SHOWN_COMMAND_CHARS = 200
AUTH_TIMEOUT_S = 10.0  # a peer that must authenticate gets this long (a slot is precious)


def subrun_version() -> str:
    """The installed subrun version, for the banner and Identify."""
    try:
        return metadata.version("subrun")
    except metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(eq=False)
class Client:
    """One connected peer: its line socket, where it is, and whether it may send commands."""

    link: LineSocket
    where: str
    authenticated: bool


class Daemon:
    """The server: one listening socket, a few clients, one session holder, one Meter."""

    def __init__(self, options: DaemonOptions, *, stream: Stream | None = None,
                 analyzer: Analyzer | None = None) -> None:
        self.options = options
        self._file = (RotatingConsoleFile(options.console_log, options.console_max_bytes)
                      if options.console_log and stream is None else None)
        self.console = Console(stream or self._file or sys.stdout)
        self._analyzer = analyzer
        self.meter: Meter | None = None
        self.policy = AccessPolicy()
        self.sessions = SessionBook()
        self._listener: socket.socket | None = None
        self._clients: list[Client] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accepting: threading.Thread | None = None
        self.port = 0

    def start(self) -> int:
        """Check the access settings, open the analyzer, start sampling, listen; the port."""
        version = subrun_version()
        self.console.say(f"subrun power daemon {version}: PTDaemon protocol, NOT SPEC PTDaemon; "
                         "its measurements are for development and tracking, never submission")
        self.options.check_exposure()
        token = read_token_file(self.options.token_file) if self.options.token_file else None
        self.policy = AccessPolicy(token, parse_networks(list(self.options.trust)))
        analyzer = self._analyzer or self._open()
        self.console.say(f"Analyzer identity response of {len(analyzer.idn)} bytes: "
                         f"{analyzer.idn} ({analyzer.name}"
                         f"{', simulated' if analyzer.simulated else ''})")
        self.meter = Meter(analyzer, self.console, SampleLog(self.options.log_path))
        self.console.say(f"Uncertainty checking for {analyzer.spec.ptd_name} is activated")
        self._listener = listen(self.options.bind, self.options.port, MAX_CLIENTS)
        self.port = self._listener.getsockname()[1]
        self.meter.start()
        self._accepting = threading.Thread(target=self._accept_loop, name="accept", daemon=True)
        self._accepting.start()
        trusted = ", ".join(self.options.trust)
        self.console.say(f"Listening on {self.options.bind}:{self.port} (trusted: {trusted}; "
                         f"others {'need the token' if token else 'refused'})")
        return self.port

    def identity(self) -> str:
        """The Identify reply: the analyzer model first, then who we really are."""
        assert self.meter is not None
        analyzer = self.meter.analyzer
        return (f"{analyzer.spec.ptd_name},daemon=subrun,version={subrun_version()}"
                f"-subrun-not-SPEC-PTDaemon,OS={platform.system()},mode=power,"
                f"analyzer={analyzer.idn.replace(',', ';')},"
                f"simulated={'yes' if analyzer.simulated else 'no'}")

    def request_stop(self) -> None:
        """Ask the daemon to stop (safe from a signal handler)."""
        self._stopping.set()

    def wait(self) -> None:
        """Block until a stop is requested, then stop."""
        while not self._stopping.wait(timeout=0.5):
            pass
        self.stop()

    def stop(self) -> None:
        """Close the clients and the port, stop sampling, close the logs."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            for client in self._clients:
                client.link.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        if self.meter is not None:
            self.meter.close()
            self.meter.log.close()
            self.meter = None
        self.console.say("Daemon stopped")
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> Daemon:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _open(self) -> Analyzer:
        model, resource = self.options.analyzer()
        return open_analyzer(model, resource, sim_path=self.options.sim_file,
                             visa_library=self.options.visa_library,
                             element=self.options.channel)

    def _accept_loop(self) -> None:
        listener = self._listener
        while listener is not None and not self._stopping.is_set():
            try:
                conn, peer = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed by stop()
            keepalive(conn)
            client = Client(LineSocket(conn), f"{peer[0]}:{peer[1]}",
                            self.policy.trusts(str(peer[0])))
            with self._lock:
                full = len(self._clients) >= MAX_CLIENTS
                if not full:
                    self._clients.append(client)
            if full:
                self._refuse(client, f"subrun's power daemon {BUSY} {MAX_CLIENTS} clients at "
                             "once; try again when one has finished")
                continue
            threading.Thread(target=self._serve, args=(client,), name="client",
                             daemon=True).start()

    def _refuse(self, client: Client, reason: str) -> None:
        self.console.say(f"Refused client {client.where}: {reason}")
        with contextlib.suppress(OSError):
            client.link.send_line(f"Error: {reason}")
        client.link.close()

    def _serve(self, client: Client) -> None:
        self.console.say(f"Client connected: {client.where}"
                         f"{'' if client.authenticated else ' (must authenticate)'}")
        try:
            while not self._stopping.is_set():
                line = self._next_line(client)
                if line is None or not self._answer(client, line):
                    break
        except (OSError, ConnectionError):
            pass
        finally:
            self._let_go(client)
            client.link.close()
            with self._lock:
                if client in self._clients:
                    self._clients.remove(client)
            self.console.say(f"Client disconnected: {client.where}")

    def _let_go(self, client: Client) -> None:
        """Free the session the client holds, before its connection closes: a client that sees
        the close may connect and ask for the session at once."""
        if self.sessions.release(client):
            self.console.say(f"Session released by {client.where}")

    def _next_line(self, client: Client) -> str | None:
        """The client's next command, or None when it closed or was dropped for idling."""
        while True:
            allowed_s = self.options.idle_timeout_s if client.authenticated else min(
                self.options.idle_timeout_s, AUTH_TIMEOUT_S)
            deadline = time.monotonic() + allowed_s
            try:
                return client.link.recv_line(deadline)
            except TimeoutError:
                if self._measuring_for(client):
                    continue  # waiting out a measurement it started is not idling
                self._let_go(client)
                self._refuse(client, f"idle for {allowed_s:g} s; "
                             "disconnected so that other clients are not locked out")
                return None

    def _measuring_for(self, client: Client) -> bool:
        meter = self.meter
        running = meter is not None and meter.measurement is not None \
            and meter.measurement.running
        return running and self.sessions.holds(client)

    def _answer(self, client: Client, line: str) -> bool:
        """Reply to one line; False when the connection is to be closed."""
        command = Command.parse(line)
        self.console.say(f"Command received from client: {_shown(line, command)}")
        if command.name == access.AUTH:
            return self._authenticate(client, ",".join(command.args))
        if not client.authenticated:
            self._refuse(client, "authentication required: send Auth,<token> first")
            return False
        if command.name in access.SESSION_COMMANDS:
            holder = self.sessions.claim(client, client.where)
            if holder is not None:
                self._send(client, [f"Error: {holder} holds the measurement session; "
                                    f"{command.name} is refused until it disconnects"])
                return True
        meter = self.meter
        if meter is None:
            return False
        self._send(client, dispatch(meter, command, self.identity))
        return True

    def _authenticate(self, client: Client, token: str) -> bool:
        if client.authenticated and self.policy.token is None:
            self._send(client, [access.AUTH_OK])  # a trusted peer: nothing to check
            return True
        reason = self.policy.authenticate(token)
        if reason is not None:
            self._refuse(client, f"authentication failed: {reason}")
            return False
        client.authenticated = True
        self._send(client, [access.AUTH_OK])
        return True

    def _send(self, client: Client, replies: list[str]) -> None:
        for reply in replies:
            client.link.send_line(reply)
        self.console.say(f"Response to client sent: {replies[0]}")


def _shown(line: str, command: Command) -> str:
    """The command as the console shows it: never the token, never a huge line whole."""
    if command.name == access.AUTH:
        return "Auth,<token>"
    if len(line) > SHOWN_COMMAND_CHARS:
        return f"{line[:SHOWN_COMMAND_CHARS]}... ({len(line)} characters)"
    return line


def main(argv: list[str] | None = None) -> int:
    """Run the daemon until SIGTERM or SIGINT; returns the exit status."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    daemon = Daemon(options)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        daemon.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        daemon.start()
    except PowerError as e:
        daemon.console.say(f"ERROR: {e}")
        daemon.stop()
        return 1
    daemon.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
