"""The lab sshd's processes that serve one client connection, found by the client's port.

Fault tests kill the server side of *their own* link; killing every session the listener forked
would cut the links of tests running beside them in other workers."""

from __future__ import annotations

import paramiko
import psutil


def serving(listener_pid: int, transport: paramiko.Transport) -> list[psutil.Process]:
    """The listener's children whose TCP connection's peer is this transport's local port."""
    port = transport.sock.getsockname()[1]  # type: ignore[union-attr]
    found = []
    for proc in psutil.Process(listener_pid).children():
        try:
            if any(c.raddr and c.raddr.port == port for c in proc.net_connections(kind="tcp")):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue  # a session that ended meanwhile
    return found
