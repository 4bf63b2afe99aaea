"""The PTDaemon TCP protocol as power-dev's server speaks it: framing, replies, sample lines.

Pure values and formats shared by our daemon (`power.daemon`) and our client (`power.client`).
Every message is one ASCII line ending in CRLF; only `RL` answers with more than one line (a
`Last <N> samples` header, then N sample lines). Times are UTC, written MM-DD-YYYY HH:MM:SS.mmm.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime

EOL = b"\r\n"
MAX_LINE_BYTES = 64 * 1024

HELLO = "Hello, PTDaemon here!"
STOP_REPLY = "Stopping untimed measurement"
NO_MEASUREMENT = "Error: no measurement to stop"
RL_MULTICHANNEL_REFUSAL = "Invalid number of parameters"
UNKNOWN_COMMAND = "Unknown command"
AUTO = "Auto"
TIME_FORMAT = "%m-%d-%Y %H:%M:%S.%f"


def go_reply(interval_ms: int, samples: int) -> str:
    """The reply to `Go`; power-dev checks the untimed form verbatim."""
    if samples == 0:
        return (f"Starting untimed measurement, maximum 500000 samples at {interval_ms}ms "
                "with 0 rampup samples")
    return f"Starting timed measurement, {samples} samples at {interval_ms}ms with 0 rampup samples"


def range_changed(quantity: str) -> str:
    """The reply to a successful `SR,V|A,...`."""
    return f"Range {quantity} changed"


def format_time(moment: datetime) -> str:
    """MM-DD-YYYY HH:MM:SS.mmm in UTC, as PTDaemon and LoadGen's power_begin write it."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%m-%d-%Y %H:%M:%S.") + f"{utc.microsecond // 1000:03d}"


def parse_time(text: str) -> datetime:
    """The UTC datetime of an MM-DD-YYYY HH:MM:SS.mmm stamp."""
    return datetime.strptime(text.strip(), TIME_FORMAT).replace(tzinfo=UTC)


def console_line(moment: datetime, message: str) -> str:
    """A PTDaemon-style console line: `<stamp>: <message>`."""
    return f"{format_time(moment)}: {message}"


@dataclass(frozen=True)
class Sample:
    """One analyzer reading at one instant."""

    time: datetime
    watts: float
    volts: float
    amps: float
    pf: float

    def values(self) -> str:
        """`Watts,<w>,Volts,<v>,Amps,<a>,PF,<pf>` with six decimals, as PTDaemon writes them."""
        return f"Watts,{self.watts:f},Volts,{self.volts:f},Amps,{self.amps:f},PF,{self.pf:f}"

    def rl_line(self) -> str:
        """The sample as `RL` returns it: no Mark (power-dev's server inserts its own)."""
        return f"Time,{format_time(self.time)},{self.values()}"

    def log_line(self, mark: str) -> str:
        """The sample as a `-l` log or spl.txt line, with its Mark."""
        return f"{self.rl_line()},Mark,{mark}"


def parse_sample_line(line: str) -> tuple[Sample, str | None] | None:
    """A `Time,<stamp>,Watts,..,Volts,..,Amps,..,PF,..[,Mark,<m>]` line, or None for others."""
    fields = line.strip().split(",")
    if len(fields) < 10 or fields[0] != "Time" or fields[2] != "Watts":
        return None
    if (fields[4], fields[6], fields[8]) != ("Volts", "Amps", "PF"):
        return None
    try:
        sample = Sample(parse_time(fields[1]), float(fields[3]), float(fields[5]),
                        float(fields[7]), float(fields[9]))
    except ValueError:
        return None
    mark = fields[11] if len(fields) >= 12 and fields[10] == "Mark" else None
    return sample, mark


@dataclass(frozen=True)
class Ranges:
    """What `RR` reports: auto-range flags (1 on, 0 off) and the ranges in A and V."""

    amps_auto: bool
    amps_range: float
    volts_auto: bool
    volts_range: float

    def reply(self) -> str:
        """The `RR` reply line."""
        return (f"Ranges,{int(self.amps_auto)},{self.amps_range:f},"
                f"{int(self.volts_auto)},{self.volts_range:f}")

    @classmethod
    def parse(cls, reply: str) -> Ranges:
        """Read an `RR` reply; raises ValueError when it is not one."""
        fields = reply.strip().split(",")
        if len(fields) != 5 or fields[0] != "Ranges":
            raise ValueError(f"not a Ranges reply: {reply!r}")
        return cls(fields[1] == "1", float(fields[2]), fields[3] == "1", float(fields[4]))

    def initial(self, quantity: str) -> str:
        """The value to restore at session end: the fixed range, or Auto (power-dev's rule)."""
        auto, value = (self.amps_auto, self.amps_range) if quantity == "A" else (
            self.volts_auto, self.volts_range)
        return f"{value:f}" if not auto and value > 0 else AUTO


@dataclass(frozen=True)
class Command:
    """A request line split into its name and comma-separated arguments."""

    name: str
    args: tuple[str, ...]

    @classmethod
    def parse(cls, line: str) -> Command:
        """Split a request line; names are matched case-sensitively, as PTDaemon does."""
        parts = [p.strip() for p in line.strip().split(",")]
        return cls(parts[0], tuple(parts[1:]))


class LineSocket:
    """A TCP socket read and written one CRLF line at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def send_line(self, text: str) -> None:
        """Send text followed by CRLF."""
        self.sock.sendall(text.encode("ascii", errors="replace") + EOL)

    def recv_line(self, deadline: float | None = None) -> str | None:
        """The next line without its terminator, or None once the peer has closed.

        With a deadline (time.monotonic()), TimeoutError is raised when the whole line has not
        arrived by then, however it trickles in; what did arrive is kept for the next call."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE_BYTES:
                raise ConnectionError(f"line longer than {MAX_LINE_BYTES} bytes")
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no complete line before the deadline")
                self.sock.settimeout(remaining)
            chunk = self.sock.recv(4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.rstrip(b"\r").decode("ascii", errors="replace")

    def close(self) -> None:
        """Close the socket; safe to call twice."""
        with contextlib.suppress(OSError):
            self.sock.close()
