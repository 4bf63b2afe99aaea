"""The daemon's console as a file that never grows past its cap.

PTDaemon prints a line per sample and per command, and a daemon serves for weeks: a console
that only grows fills the disk and costs whoever reads it. This file keeps at most `max_bytes`;
when the next line would pass that, the file is renamed to `<name>.1` (replacing the older
one) and a fresh file starts with a line saying so. So at most two caps' worth are on disk, and
the newest lines are always in `<name>` and, just before a rotation, `<name>.1`.
"""

from __future__ import annotations

import threading
from pathlib import Path

MIB = 1024 * 1024
DEFAULT_CONSOLE_MAX_BYTES = 8 * MIB
MIN_CONSOLE_MAX_BYTES = 4096


def rotated(path: Path) -> Path:
    """Where the previous part of a console file is kept."""
    return path.with_name(path.name + ".1")


class RotatingConsoleFile:
    """A text stream (write + flush) over a console file capped at max_bytes."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_CONSOLE_MAX_BYTES) -> None:
        if max_bytes < MIN_CONSOLE_MAX_BYTES:
            raise ValueError(f"a console cap must be at least {MIN_CONSOLE_MAX_BYTES} bytes, "
                             f"not {max_bytes}")
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab")
        self._size = self._file.tell()

    def write(self, text: str) -> int:
        """Append text (whole lines); rotates first when it would pass the cap."""
        data = text.encode("utf-8", errors="replace")[: self.max_bytes // 2]
        with self._lock:
            if self._file.closed:
                return 0
            if self._size + len(data) > self.max_bytes:
                self._rotate()
            self._file.write(data)
            self._size += len(data)
        return len(text)

    def flush(self) -> None:
        """Hand the written lines to the operating system."""
        with self._lock:
            if not self._file.closed:
                self._file.flush()

    def close(self) -> None:
        """Flush and close the file; later writes are dropped."""
        with self._lock:
            self._file.close()

    def _rotate(self) -> None:
        self._file.close()
        self.path.replace(rotated(self.path))
        self._file = self.path.open("ab")
        note = (f"(console continued: earlier lines are in {rotated(self.path).name}; this "
                f"file is capped at {self.max_bytes} bytes)\n").encode()
        self._file.write(note)
        self._size = len(note)
