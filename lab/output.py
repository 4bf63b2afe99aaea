"""Bounded capture of a command's output, shared by every transport.

A target is not trusted to print little: a runaway harness, a daemon's console or a hostile
host can print gigabytes. Each stream keeps only its last `cap_bytes` (what an operator needs
to see why something failed) and counts what it dropped, so the controller's memory stays
bounded whatever the target sends. Lines handed to a live sink are bounded the same way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

MIB = 1024 * 1024
DEFAULT_OUTPUT_CAP_BYTES = 16 * MIB  # per stream (stdout, stderr) of one command
LINE_CAP_BYTES = 64 * 1024  # a longer "line" reaches a live sink in pieces of this size
CHUNK_BYTES = 64 * 1024  # how much is read from a pipe or channel at once


class OutputTail:
    """The last cap_bytes of a stream, and its complete lines handed to an optional sink."""

    def __init__(self, cap_bytes: int, sink: Callable[[str], None] | None = None) -> None:
        if cap_bytes < 1:
            raise ValueError(f"an output cap must be at least 1 byte, not {cap_bytes}")
        self.cap_bytes = cap_bytes
        self.sink = sink
        self.dropped_bytes = 0
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Take the next piece of the stream; whole chunks older than the cap are dropped."""
        if not chunk:
            return
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size - len(self._chunks[0]) >= self.cap_bytes:
            first = self._chunks.popleft()
            self._size -= len(first)
            self.dropped_bytes += len(first)
        if self.sink is not None:
            self._to_sink(chunk)

    def _to_sink(self, chunk: bytes) -> None:
        assert self.sink is not None
        self._pending += chunk
        *lines, rest = bytes(self._pending).split(b"\n")
        for line in lines:
            self.sink(line.decode("utf-8", errors="replace"))
        while len(rest) > LINE_CAP_BYTES:
            self.sink(rest[:LINE_CAP_BYTES].decode("utf-8", errors="replace"))
            rest = rest[LINE_CAP_BYTES:]
        self._pending = bytearray(rest)

    def finish(self) -> str:
        """The kept text (the stream's end); flushes an unterminated last line to the sink."""
        if self.sink is not None and self._pending:
            self.sink(self._pending.decode("utf-8", errors="replace"))
            self._pending = bytearray()
        data = b"".join(self._chunks)
        if len(data) > self.cap_bytes:
            cut = len(data) - self.cap_bytes
            self.dropped_bytes += cut
            data = data[cut:]
        self._chunks = deque([data]) if data else deque()
        self._size = len(data)
        return data.decode("utf-8", errors="replace")
