"""subrun's PTDaemon-protocol daemon: a TCP server in front of one analyzer.

It takes PTDaemon's command line, so power-dev's unmodified server can start it in place of
SPEC PTDaemon:

    python -m power.daemon -l <sample log> -p <port> [-b N] [-c CH] [-g|-n|-y|-U]
                           [--bind ADDR] [--sim-file YAML] [--visa-library LIB]
                           <device type> <device port>

device type 49 is a WT310/WT310E, 52 a WT333E; device port is a VISA resource string, an
instrument serial number (with -y), `sim` (the shipped pyvisa-sim model for the type) or
`sim:<model>`. It answers the commands power-dev sends with the replies it checks, plus
`Load,busy|idle` (subrun's load hint for a simulated instrument). It says honestly what it is:
its Identify reply carries `version=<subrun version>-subrun-not-SPEC-PTDaemon`, so results it
measured never pass as SPEC PTDaemon's. It serves one client at a time and exits cleanly on
SIGTERM or SIGINT, releasing its port.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import TextIO

from lab.errors import PowerError
from power.commands import dispatch
from power.instrument import DEFAULT_MODEL_FOR_TYPE, MODELS, Analyzer, open_analyzer
from power.meter import Console, Meter, SampleLog
from power.protocol import Command, LineSocket

INTERFACE_FLAGS = ("-g", "-n", "-y", "-U")


def subrun_version() -> str:
    """The installed subrun version, for the banner and Identify."""
    try:
        return metadata.version("subrun")
    except metadata.PackageNotFoundError:
        return "0.0.0"


@dataclass(frozen=True)
class DaemonOptions:
    """The daemon's command line, parsed."""

    log_path: Path
    port: int
    device_type: int
    device_port: str
    bind: str = "127.0.0.1"
    channel: int = 1
    interface_flag: str = ""
    sim_file: Path | None = None
    visa_library: str = ""

    def analyzer(self) -> tuple[str, str]:
        """(model, resource) the device type and port designate."""
        model = DEFAULT_MODEL_FOR_TYPE.get(self.device_type)
        if model is None:
            raise PowerError(f"Device type {self.device_type} is not supported by subrun's "
                             f"daemon; use 49 (WT310/WT310E) or 52 (WT333E).")
        port = self.device_port
        if port == "sim" or port.startswith("sim:"):
            chosen = port.partition(":")[2] or model
            if chosen not in MODELS:
                raise PowerError(f"Device port {port!r} names an unknown model; use sim:"
                                 f"{' or sim:'.join(MODELS)}.")
            return chosen, "sim"
        if "::" not in port and self.interface_flag != "-y":
            raise PowerError(f"Device port {port!r} is neither a VISA resource string (e.g. "
                             "USB0::0x0B21::0x0025::<serial>::INSTR) nor a serial number given "
                             "with -y; subrun's daemon reaches instruments through VISA only.")
        return model, port


def parse_args(argv: list[str]) -> DaemonOptions:
    """Read PTDaemon-style arguments (argparse reports bad ones and exits with status 2)."""
    parser = argparse.ArgumentParser(prog="python -m power.daemon",
                                     description="subrun's PTDaemon-protocol power daemon")
    parser.add_argument("-l", dest="log_path", type=Path, required=True, help="sample log file")
    parser.add_argument("-p", dest="port", type=int, default=8888, help="TCP port")
    parser.add_argument("-b", dest="board", type=int, help="GPIB board (unused)")
    parser.add_argument("-c", dest="channel", default="1", help="element (channel) to read")
    parser.add_argument("-e", dest="extended", action="store_true", help="accepted, ignored")
    for flag in INTERFACE_FLAGS:
        parser.add_argument(flag, dest="interface_flag", action="store_const", const=flag)
    parser.add_argument("-D", dest="dc", action="store_true", help="DC mode (not supported)")
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--sim-file", type=Path, help="pyvisa-sim YAML instead of the shipped")
    parser.add_argument("--visa-library", default="", help="pyvisa library, e.g. @py")
    parser.add_argument("device_type", type=int)
    parser.add_argument("device_port")
    ns = parser.parse_args(argv)
    if ns.dc:
        parser.error("DC measurement (-D) is not supported by subrun's daemon")
    if not ns.channel.split(",")[0].isdigit():
        parser.error(f"-c {ns.channel}: give the element number, e.g. -c 1")
    return DaemonOptions(ns.log_path, ns.port, ns.device_type, ns.device_port, ns.bind,
                         int(ns.channel.split(",")[0]), ns.interface_flag or "", ns.sim_file,
                         ns.visa_library)


class Daemon:
    """The server: one listening socket, one client at a time, one Meter behind it."""

    def __init__(self, options: DaemonOptions, *, stream: TextIO | None = None,
                 analyzer: Analyzer | None = None) -> None:
        self.options = options
        self.console = Console(stream or sys.stdout)
        self._analyzer = analyzer
        self.meter: Meter | None = None
        self._listener: socket.socket | None = None
        self._client: tuple[LineSocket, str] | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._accepting: threading.Thread | None = None
        self.port = 0

    def start(self) -> int:
        """Open the analyzer, start sampling, listen; returns the bound port."""
        version = subrun_version()
        self.console.say(f"subrun power daemon {version}: PTDaemon protocol, NOT SPEC PTDaemon; "
                         "its measurements are for development and tracking, never submission")
        analyzer = self._analyzer or self._open()
        self.console.say(f"Analyzer identity response of {len(analyzer.idn)} bytes: "
                         f"{analyzer.idn} ({analyzer.name}"
                         f"{', simulated' if analyzer.simulated else ''})")
        self.meter = Meter(analyzer, self.console, SampleLog(self.options.log_path))
        self.console.say(f"Uncertainty checking for {analyzer.spec.ptd_name} is activated")
        self._listener = _listen(self.options.bind, self.options.port)
        self.port = self._listener.getsockname()[1]
        self.meter.start()
        self._accepting = threading.Thread(target=self._accept_loop, name="accept", daemon=True)
        self._accepting.start()
        self.console.say(f"Listening on {self.options.bind}:{self.port}")
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
        """Close the client and the port, stop sampling, close the log."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            if self._client is not None:
                self._client[0].close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        if self.meter is not None:
            self.meter.close()
            self.meter.log.close()
            self.meter = None
        self.console.say("Daemon stopped")

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
            conn.settimeout(None)
            where = f"{peer[0]}:{peer[1]}"
            link = LineSocket(conn)
            with self._lock:
                busy = self._client
                if busy is not None and _hung_up(busy[0].sock):
                    busy = None  # gone already; its thread has not noticed yet
                if busy is None:
                    self._client = (link, where)
            if busy is not None:
                self._refuse(conn, where, busy[1])
                continue
            threading.Thread(target=self._serve, args=(link, where), name="client",
                             daemon=True).start()

    def _refuse(self, conn: socket.socket, where: str, busy: str) -> None:
        reply = (f"Error: subrun's power daemon serves one client at a time and {busy} is "
                 "connected; try again when it has finished")
        self.console.say(f"Refused client {where}: {busy} is connected")
        with contextlib.suppress(OSError):
            LineSocket(conn).send_line(reply)
        conn.close()

    def _serve(self, link: LineSocket, where: str) -> None:
        self.console.say(f"Client connected: {where}")
        try:
            while not self._stopping.is_set():
                line = link.recv_line()
                if line is None:
                    break
                self._answer(link, line)
        except OSError:
            pass
        finally:
            link.close()
            with self._lock:
                if self._client is not None and self._client[0] is link:
                    self._client = None
            self.console.say(f"Client disconnected: {where}")

    def _answer(self, link: LineSocket, line: str) -> None:
        self.console.say(f"Command received from client: {line}")
        meter = self.meter
        if meter is None:
            return
        replies = dispatch(meter, Command.parse(line), self.identity)
        for reply in replies:
            link.send_line(reply)
        self.console.say(f"Response to client sent: {replies[0]}")


def _hung_up(sock: socket.socket) -> bool:
    """True when the peer has closed the connection (a pending EOF or a reset)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _listen(address: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((address, port))
    except OSError as e:
        listener.close()
        raise PowerError(f"subrun's power daemon cannot listen on {address}:{port}: "
                         f"{e.strerror}; is another daemon still running there?") from e
    listener.listen(4)
    listener.settimeout(0.2)
    return listener


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
