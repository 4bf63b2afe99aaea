"""A minimal SNTP responder for tests: answers NTP client requests with this machine's clock.

power-dev's client and server both insist on an NTP server (UDP port 123, not configurable),
so tests that run them over loopback start one of these on an address of their own in
127.0.0.0/8 (binding port 123 needs root), and stop it when done.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

NTP_EPOCH_OFFSET = 2208988800  # seconds from 1900-01-01 to 1970-01-01


def _stamp(moment: float) -> bytes:
    seconds = int(moment) + NTP_EPOCH_OFFSET
    fraction = int((moment % 1) * 2**32)
    return struct.pack("!II", seconds, fraction)


class SntpServer:
    """Serves the local clock at address:123 (stratum 1) until closed."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address or f"127.{random.randint(100, 250)}.{random.randint(1, 250)}.1"
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((self.address, 123))
        self._sock.settimeout(0.2)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="sntp", daemon=True)

    def __enter__(self) -> SntpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                request, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            if len(request) < 48:
                continue
            received = time.time()
            version = (request[0] >> 3) & 0x7
            header = bytes([(version << 3) | 4, 1, request[2], 0xEC])  # server mode, stratum 1
            reply = (header + struct.pack("!II", 0, 0) + b"LOCL" + _stamp(received)
                     + request[40:48] + _stamp(received) + _stamp(time.time()))
            self._sock.sendto(reply, peer)
