"""The daemon's listening socket and the settings of each accepted connection."""

from __future__ import annotations

import socket

from lab.errors import PowerError


def listen(address: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on address:port that wakes every 0.2 s (so stop is noticed)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((address, port))
    except OSError as e:
        listener.close()
        raise PowerError(f"subrun's power daemon cannot listen on {address}:{port}: "
                         f"{e.strerror}; is another daemon still running there?") from e
    listener.listen(backlog)
    listener.settimeout(0.2)
    return listener


def keepalive(conn: socket.socket) -> None:
    """Blocking, and probed when silent for 30 s: a peer whose host vanished goes in ~1 min."""
    conn.settimeout(None)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
