"""One run per analyzer at a time, across every flow and process on the controller.

`analyzer_lock(name)` holds an exclusive `flock` on `<lock_dir>/<name>.lock` for as long as
the `with` block runs; the file records who holds it, so a run that has to wait (or gives up)
can say which run has the analyzer. The kernel drops the lock when its holder dies, so a
crashed campaign never leaves an analyzer locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from lab.errors import PowerError

DEFAULT_LOCK_DIR = Path(os.environ.get("SUBRUN_LOCK_DIR", "/var/tmp/subrun/locks"))
POLL_S = 0.2


@contextmanager
def analyzer_lock(name: str, holder: str, *, lock_dir: Path | None = None,
                  timeout_s: float = 0.0) -> Iterator[Path]:
    """Hold the analyzer called name for holder (a run label); wait up to timeout_s for it."""
    directory = lock_dir or DEFAULT_LOCK_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path, name, holder, timeout_s)
        os.ftruncate(fd, 0)
        record = {"holder": holder, "pid": os.getpid(), "since": datetime.now(UTC).isoformat()}
        os.pwrite(fd, json.dumps(record).encode() + b"\n", 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_holder(name: str, *, lock_dir: Path | None = None) -> dict[str, object] | None:
    """Who holds the analyzer now (holder, pid, since), or None when it is free."""
    path = (lock_dir or DEFAULT_LOCK_DIR) / f"{name}.lock"
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_record(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, name: str, holder: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
    other = _read_record(path) or {}
    raise PowerError(
        f"Analyzer '{name}' is in use by run '{other.get('holder', '?')}' (pid "
        f"{other.get('pid', '?')}, since {other.get('since', '?')}); '{holder}' waited "
        f"{timeout_s:g} s. One run measures with an analyzer at a time: wait for that run, "
        "or give this run another analyzer.")


def _read_record(path: Path) -> dict[str, object] | None:
    try:
        text = path.read_text().strip()
        return json.loads(text) if text else None
    except (OSError, json.JSONDecodeError):
        return None
