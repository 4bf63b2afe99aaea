"""The daemon's command line: PTDaemon's own arguments, plus subrun's listening and access
settings (where it listens, its token, which peers it trusts, idle clients, its console)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from lab.errors import PowerError
from power.access import is_loopback, parse_networks
from power.console_file import DEFAULT_CONSOLE_MAX_BYTES, MIN_CONSOLE_MAX_BYTES
from power.instrument import DEFAULT_MODEL_FOR_TYPE, MODELS

INTERFACE_FLAGS = ("-g", "-n", "-y", "-U")
DEFAULT_TRUST = ("127.0.0.0/8", "::1/128")
DEFAULT_IDLE_TIMEOUT_S = 60.0


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
    token_file: Path | None = None  # the shared token peers outside `trust` must send
    trust: tuple[str, ...] = DEFAULT_TRUST  # networks served without a token
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    console_log: Path | None = None  # None: the console goes to stdout, as PTDaemon's does
    console_max_bytes: int = DEFAULT_CONSOLE_MAX_BYTES

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

    def check_exposure(self) -> None:
        """Refuse to listen beyond loopback without a token: anyone could drive the analyzer."""
        if not is_loopback(self.bind) and self.token_file is None:
            raise PowerError(f"subrun's power daemon will not listen on {self.bind} without a "
                             "token: anyone who reaches that address could start, stop and "
                             "re-range measurements. Give --token-file FILE (the shared token), "
                             "or listen on 127.0.0.1.")


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
    parser.add_argument("--token-file", type=Path,
                        help="file holding the token untrusted peers send as Auth,<token>")
    parser.add_argument("--trust", action="append", metavar="CIDR",
                        help="network served without a token (repeatable; default loopback)")
    parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S,
                        metavar="S", help="drop a client silent this long (default 60)")
    parser.add_argument("--console-log", type=Path, help="console to this capped file")
    parser.add_argument("--console-max-bytes", type=int, default=DEFAULT_CONSOLE_MAX_BYTES)
    parser.add_argument("device_type", type=int)
    parser.add_argument("device_port")
    ns = parser.parse_args(argv)
    if ns.dc:
        parser.error("DC measurement (-D) is not supported by subrun's daemon")
    if not ns.channel.split(",")[0].isdigit():
        parser.error(f"-c {ns.channel}: give the element number, e.g. -c 1")
    if ns.idle_timeout <= 0:
        parser.error(f"--idle-timeout {ns.idle_timeout:g}: give a positive number of seconds")
    if ns.console_max_bytes < MIN_CONSOLE_MAX_BYTES:
        parser.error(f"--console-max-bytes must be at least {MIN_CONSOLE_MAX_BYTES}")
    trust = tuple(ns.trust or DEFAULT_TRUST)
    try:
        parse_networks(list(trust))
    except ValueError as e:
        parser.error(f"--trust: {e}")
    return DaemonOptions(ns.log_path, ns.port, ns.device_type, ns.device_port, ns.bind,
                         int(ns.channel.split(",")[0]), ns.interface_flag or "", ns.sim_file,
                         ns.visa_library, ns.token_file, trust, ns.idle_timeout,
                         ns.console_log, ns.console_max_bytes)
