"""A TCP link between the controller and a lab sshd that tests can break, on loopback.

It forwards bytes both ways and can `cut()` every connection (a reset, as when a Wi-Fi link
drops), `partition()` the link silently (sockets stay open, nothing is forwarded, nothing is
refused: packets lost, not reset; new connections are accepted and then hear nothing), and
`heal()` it. `proxied()` points a host entry at the proxy, with a known_hosts entry for the
proxy's port carrying the real host key, so host key verification stays on.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from pathlib import Path

import yaml

from lab.config import HostConfig, Inventory

CHUNK = 64 * 1024


class LinkProxy:
    """Listens on address:0 and forwards each connection to upstream."""

    def __init__(self, upstream: tuple[str, int], address: str = "127.0.0.2") -> None:
        self.upstream = upstream
        self._listener = socket.create_server((address, 0))
        self.address, self.port = self._listener.getsockname()[:2]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = False
        self._refusing = False
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> int:
        """Reset every open connection; return how many were cut."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _reset(sock)
        self.cuts += bool(pairs)
        return len(pairs)

    def partition(self) -> None:
        """Stop forwarding without closing anything: the link goes silent."""
        self._forwarding.clear()

    def heal(self) -> None:
        self._forwarding.set()

    def down(self) -> None:
        """The machine is gone: every connection reset, new ones refused, until `up()`."""
        self._refusing = True
        self.cut()

    def up(self) -> None:
        self._refusing = False

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peer = {client: server, server: client}
        try:
            while True:
                if not self._forwarding.wait(0.2):
                    if client.fileno() < 0 or server.fileno() < 0:
                        return
                    continue  # silent: the bytes wait in the kernel, as on a dead route
                ready, _, _ = select.select([client, server], [], [], 0.2)
                for sock in ready:
                    data = sock.recv(CHUNK)
                    if not data:
                        raise OSError("closed")
                    peer[sock].sendall(data)
        except (OSError, ValueError):
            with self._lock:
                if (client, server) in self._pairs:
                    self._pairs.remove((client, server))
            for sock in (client, server):
                _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset, not an orderly shutdown."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def proxied(config: HostConfig, proxy: LinkProxy, folder: Path, **update: object) -> HostConfig:
    """The host entry reached through proxy, with its host key known at the proxy's port."""
    assert config.known_hosts is not None and config.address is not None
    entry = f"[{config.address}]:{config.port}" if config.port != 22 else config.address
    keys = [line.split(None, 1)[1] for line in config.known_hosts.read_text().splitlines()
            if line.split(None, 1)[:1] == [entry]]
    assert keys, f"no known_hosts entry for {entry}"
    known = folder / f"known_hosts-{config.name}-{proxy.port}"
    known.write_text("".join(f"[{proxy.address}]:{proxy.port} {k}\n" for k in keys))
    return config.model_copy(update={"address": proxy.address, "port": proxy.port,
                                     "known_hosts": known, **update})


def proxied_inventory(inventory: Inventory, proxies: dict[str, LinkProxy], folder: Path,
                      **update: object) -> Path:
    """A copy of the inventory whose hosts in proxies are reached through them; its path."""
    hosts = [proxied(h, proxies[h.name], folder, **update) if h.name in proxies else h
             for h in inventory.hosts]
    path = folder / "hosts-proxied.yaml"
    data = inventory.model_copy(update={"hosts": hosts}).model_dump(mode="json", exclude_none=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
