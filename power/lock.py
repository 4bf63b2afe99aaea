"""One run per analyzer at a time, across every flow and process on the controller.

`analyzer_lock(name)` holds an exclusive `flock` on `<lock_dir>/<name>.lock` for as long as
the `with` block runs; the file records who holds it, so a run that has to wait (or gives up)
can say which run has the analyzer. The kernel drops the lock when its holder dies, so a
crashed campaign never leaves an analyzer locked.

The lock directory is private (the default is `/var/tmp/subrun-<uid>`, made with mode 0700): in
a folder others can write to, a planted symlink would make the lock's truncation destroy a file
of the user's. A directory that is not ours, or that group or others can write to, is refused,
and the lock file is opened relative to it without following symlinks.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from lab.errors import PowerError

DEFAULT_LOCK_DIR = Path(os.environ.get("SUBRUN_LOCK_DIR", f"/var/tmp/subrun-{os.geteuid()}"))
POLL_S = 0.2


@contextmanager
def analyzer_lock(name: str, holder: str, *, lock_dir: Path | None = None,
                  timeout_s: float = 0.0) -> Iterator[Path]:
    """Hold the analyzer called name for holder (a run label); wait up to timeout_s for it."""
    directory = lock_dir or DEFAULT_LOCK_DIR
    path = directory / f"{name}.lock"
    fd = _open_lock(directory, path, os.O_RDWR | os.O_CREAT)
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
    directory = lock_dir or DEFAULT_LOCK_DIR
    path = directory / f"{name}.lock"
    if not path.exists():
        return None
    fd = _open_lock(directory, path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_record(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _open_lock(directory: Path, path: Path, flags: int) -> int:
    """The lock file's descriptor, opened in a private directory without following symlinks."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise _refused(directory, f"it cannot be opened as a directory ({e.strerror})") from e
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise _refused(directory, "it belongs to another user or others may write to it")
        try:
            fd = os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
        except OSError as e:
            raise _refused(directory, f"{path.name} cannot be opened ({e.strerror}; a symlink "
                                      "is never followed)") from e
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refused(directory, f"{path.name} is not a regular file")
    return fd


def _refused(directory: Path, why: str) -> PowerError:
    return PowerError(f"The analyzer lock directory {directory} is refused: {why}. Analyzer "
                      "locks live in a private directory (mode 0700, owned by you): remove the "
                      "offending entry, or set SUBRUN_LOCK_DIR to such a directory.")


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
        fd = _open_lock(path.parent, path, os.O_RDONLY)
        try:
            text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        finally:
            os.close(fd)
        return json.loads(text) if text else None
    except (OSError, PowerError, json.JSONDecodeError):
        return None
