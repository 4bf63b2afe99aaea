"""A PTDaemon-protocol client: what a power session says to the daemon, and what it heard.

It speaks to subrun's daemon or to SPEC PTDaemon alike, records every exchange (the way
power-dev's server.json keeps `ptd_messages`), and turns a refusal, a silence or a dropped
connection into a PowerError that names the daemon and what was being done.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

from lab.errors import PowerError
from power import access, protocol
from power.protocol import LineSocket, Ranges, Sample


@dataclass(frozen=True)
class Identity:
    """The parsed Identify reply."""

    reply: str
    model: str  # e.g. YokogawaWT310E
    version: str  # the text after version=, up to its first '-'

    @property
    def is_subrun(self) -> bool:
        """True for subrun's own daemon (which accepts load hints)."""
        return "subrun" in self.reply

    @classmethod
    def parse(cls, reply: str) -> Identity:
        """Split an Identify reply into model and version."""
        model = reply.split(",")[0].strip()
        version = ""
        if "version=" in reply:
            version = reply.split("version=", 1)[1].split(",")[0].split("-")[0]
        return cls(reply, model, version)


@dataclass
class PtdClient:
    """One TCP connection to a PTDaemon-protocol daemon."""

    address: str
    port: int
    timeout_s: float = 30.0
    messages: list[tuple[str, str]] = field(default_factory=list)
    # the shared token of a daemon reached beyond loopback (`Auth,<token>` before Hello)
    token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._link: LineSocket | None = None
        self._lock = threading.Lock()  # one exchange at a time, whichever thread asks

    @property
    def where(self) -> str:
        return f"the power daemon at {self.address}:{self.port}"

    def connect(self) -> Identity:
        """Connect, check the greeting, and identify the analyzer behind the daemon."""
        try:
            sock = socket.create_connection((self.address, self.port), timeout=self.timeout_s)
        except OSError as e:
            raise PowerError(f"Could not connect to {self.where}: {e.strerror or e}. Start the "
                             "daemon (or check `analyzers:` in hosts.yaml), then retry.") from e
        self._link = LineSocket(sock)
        if self.token is not None:
            self._authenticate(self.token)
        hello = self.command("Hello")
        if hello != protocol.HELLO:
            self.close()
            raise PowerError(f"{self.where.capitalize()} answered Hello with {hello!r}, not "
                             f"{protocol.HELLO!r}: it is not a PTDaemon-protocol daemon, or it "
                             "already serves another client.")
        return Identity.parse(self.command("Identify"))

    def _authenticate(self, token: str) -> None:
        with self._lock:
            assert self._link is not None
            try:
                self._link.send_line(f"{access.AUTH},{token}")
            except OSError as e:
                raise self._lost(access.AUTH, e) from e
            reply = self._receive(access.AUTH)
        self.messages.append((f"{access.AUTH},<token>", reply))
        if reply != access.AUTH_OK:
            self.close()
            raise PowerError(f"{self.where.capitalize()} refused subrun's token: {reply!r}. "
                             "The daemon was started with another token: make `token_env:` or "
                             "`token_file:` of the analyzer in hosts.yaml hold the same one.")

    def command(self, text: str) -> str:
        """Send one command and return its reply line."""
        with self._lock:
            return self._exchange(text)

    def checked(self, text: str, expected: str) -> str:
        """Send a command whose reply must be exactly expected."""
        reply = self.command(text)
        if reply != expected:
            raise PowerError(f"{self.where.capitalize()} answered {text!r} with {reply!r} "
                             f"instead of {expected!r}.")
        return reply

    def read_ranges(self) -> Ranges:
        """The analyzer's present ranges (`RR`)."""
        reply = self.command("RR")
        try:
            return Ranges.parse(reply)
        except ValueError as e:
            raise PowerError(f"{self.where.capitalize()} answered RR with {reply!r}.") from e

    def set_range(self, quantity: str, value: str) -> None:
        """`SR,<V|A>,<value|Auto>`; the daemon rounds a value up to a real range."""
        self.checked(f"SR,{quantity},{value}", protocol.range_changed(quantity))

    def go(self, interval_ms: int, mark: str) -> None:
        """Start an untimed measurement marked mark."""
        self.checked(f"Go,{interval_ms},0,{mark}", protocol.go_reply(interval_ms, 0))

    def stop(self) -> None:
        """Stop the measurement."""
        self.checked("Stop", protocol.STOP_REPLY)

    def read_samples(self) -> list[Sample]:
        """The samples not read before (`RL,*,*`, then `RL` as power-dev does)."""
        with self._lock:
            header = self._exchange("RL,*,*")
            if protocol.RL_MULTICHANNEL_REFUSAL in header:
                header = self._exchange("RL")
            parts = header.split(" ")
            if len(parts) < 2 or parts[0] != "Last" or not parts[1].isdigit():
                raise PowerError(f"{self.where.capitalize()} answered RL with {header!r}.")
            lines = [self._receive("RL") for _ in range(int(parts[1]))]
        samples = []
        for line in lines:
            parsed = protocol.parse_sample_line(line)
            if parsed is not None:
                samples.append(parsed[0])
        return samples

    def set_load(self, busy: bool) -> None:
        """Tell subrun's daemon whether the workload runs (drives a simulated load)."""
        self.checked(f"Load,{'busy' if busy else 'idle'}", "Load changed")

    def close(self) -> None:
        """Close the connection."""
        if self._link is not None:
            self._link.close()
            self._link = None

    def _exchange(self, text: str) -> str:
        if self._link is None:
            raise PowerError(f"Not connected to {self.where} (sending {text!r}).")
        try:
            self._link.send_line(text)
        except OSError as e:
            raise self._lost(text, e) from e
        reply = self._receive(text)
        self.messages.append((text, reply))
        return reply

    def _receive(self, doing: str) -> str:
        assert self._link is not None
        try:
            line = self._link.recv_line()
        except (OSError, ConnectionError) as e:
            raise self._lost(doing, e) from e
        if line is None:
            raise self._lost(doing, None)
        return line

    def _lost(self, doing: str, error: BaseException | None) -> PowerError:
        cause = "timed out" if isinstance(error, TimeoutError) else (
            f"failed: {error}" if error else "closed the connection")
        return PowerError(f"{self.where.capitalize()} {cause} while answering {doing!r}; the "
                          "daemon or its host may have stopped.")

    def __enter__(self) -> PtdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
