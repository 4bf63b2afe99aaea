"""Who may talk to subrun's daemon, and which client may change what it measures.

Two rules, kept apart from the sockets so they can be read (and tested) on their own:

- **Peers.** A peer on a trusted network (by default the loopback networks, i.e. a process on
  the daemon's own machine, which is where power-dev's server runs) is served at once, exactly
  as SPEC PTDaemon serves it: power-dev's unmodified client never has to know about tokens.
  Any other peer must first send `Auth,<token>` with the shared token the daemon was started
  with; anything else, or a wrong token, is answered with one error line and the connection
  is closed. A daemon without a token serves trusted peers only. The trusted networks are a
  setting (`--trust`) rather than a hard-coded "loopback" so that the rule can be exercised on
  one machine: trust only 127.0.0.1/32 and a client connecting from 127.0.0.3 is remote.
- **The session.** Commands that change or consume the measurement (`Go`, `Stop`, `SR`, `RL`,
  `Load`) belong to one client at a time: the first client that sends one while no one holds
  the session takes it and keeps it until it disconnects (or is dropped as idle). Every other
  client may still ask (`Hello`, `Identify`, `RR`, `Watts`, ...). A measurement outlives the
  client that started it, so a controller that reconnects after a crash can Stop it.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
from dataclasses import dataclass
from pathlib import Path

from lab.errors import PowerError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK: tuple[IPNetwork, ...] = (ipaddress.ip_network("127.0.0.0/8"),
                                   ipaddress.ip_network("::1/128"))
AUTH = "Auth"
AUTH_OK = "Auth OK"
SESSION_COMMANDS = frozenset({"Go", "Stop", "SR", "RL", "Load"})
MAX_TOKEN_BYTES = 4096


def is_loopback(address: str) -> bool:
    """True for an IP address on the loopback networks (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def parse_networks(texts: list[str]) -> tuple[IPNetwork, ...]:
    """Networks from CIDR strings (`127.0.0.1/32`, `10.1.0.0/16`); raises ValueError."""
    return tuple(ipaddress.ip_network(text, strict=False) for text in texts)


def read_token_file(path: Path) -> str:
    """The shared token in path (surrounding whitespace removed); raises PowerError."""
    try:
        raw = path.read_bytes()[:MAX_TOKEN_BYTES + 1]
    except OSError as e:
        raise PowerError(f"Cannot read the token file {path}: {e.strerror}.") from e
    token = raw.decode("utf-8", errors="replace").strip()
    if not token or len(raw) > MAX_TOKEN_BYTES or "," in token or "\n" in token:
        raise PowerError(f"The token file {path} must hold one line of at most "
                         f"{MAX_TOKEN_BYTES} bytes, without commas.")
    return token


@dataclass(frozen=True)
class AccessPolicy:
    """The daemon's shared token (None: trusted peers only) and its trusted networks."""

    token: str | None = None
    trusted: tuple[IPNetwork, ...] = LOOPBACK

    def trusts(self, peer: str) -> bool:
        """True when a peer at this IP address is served without a token."""
        try:
            ip = ipaddress.ip_address(peer.split("%")[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == net.version and ip in net for net in self.trusted)

    def authenticate(self, given: str) -> str | None:
        """None when given is the token, else the reason it is refused."""
        if self.token is None:
            return "this daemon has no token and serves trusted peers only"
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return None
        return "wrong token"


class SessionBook:
    """Which client holds the measurement session (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object | None = None
        self._holder_name = ""

    def claim(self, client: object, name: str) -> str | None:
        """Take or keep the session for client; the holder's name when another has it."""
        with self._lock:
            if self._holder is None:
                self._holder, self._holder_name = client, name
            return None if self._holder is client else self._holder_name

    def holds(self, client: object) -> bool:
        """True when client holds the session."""
        with self._lock:
            return self._holder is client

    def release(self, client: object) -> bool:
        """Free the session if client holds it; True when it did."""
        with self._lock:
            if self._holder is not client:
                return False
            self._holder, self._holder_name = None, ""
            return True
