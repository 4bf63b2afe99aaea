"""The PTDaemon TCP protocol as power-dev's server speaks it: framing, replies, sample lines.

Pure values and formats shared by our daemon (`power.daemon`) and our client (`power.client`);
sample lines and stamps are those of the sample logs (`bench.power_samples`).
Every message is one ASCII line ending in CRLF; only `RL` answers with more than one line (a
`Last <N> samples` header, then N sample lines). Times are UTC, written MM-DD-YYYY HH:MM:SS.mmm.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from datetime import datetime

# the sample lines RL answers with are the lines of the sample logs: one reader, in bench
from bench.power_samples import Sample as Sample
from bench.power_samples import format_time as format_time
from bench.power_samples import parse_sample_line as parse_sample_line
from bench.power_samples import parse_time as parse_time

EOL = b"\r\n"
MAX_LINE_BYTES = 64 * 1024

HELLO = "Hello, PTDaemon here!"
STOP_REPLY = "Stopping untimed measurement"
NO_MEASUREMENT = "Error: no measurement to stop"
RL_MULTICHANNEL_REFUSAL = "Invalid number of parameters"
UNKNOWN_COMMAND = "Unknown command"
AUTO = "Auto"


def go_reply(interval_ms: int, samples: int) -> str:
    """The reply to `Go`; power-dev checks the untimed form verbatim."""
    if samples == 0:
        return (f"Starting untimed measurement, maximum 500000 samples at {interval_ms}ms "
                "with 0 rampup samples")
    return f"Starting timed measurement, {samples} samples at {interval_ms}ms with 0 rampup samples"


def range_changed(quantity: str) -> str:
    """The reply to a successful `SR,V|A,...`."""
    return f"Range {quantity} changed"


def console_line(moment: datetime, message: str) -> str:
    """A PTDaemon-style console line: `<stamp>: <message>`."""
    return f"{format_time(moment)}: {message}"


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
