"""Put a new folder in place of an old one in one step: a reader, or a crash, sees the old tree
or the new one, never no tree and never half of one.

On Linux `renameat2(RENAME_EXCHANGE)` swaps the two names atomically; the old tree is then under
the new one's former name, for the caller to remove. Where that call is missing (another system,
a file system without it), the old tree is renamed aside to `<root>.previous` and the new one
renamed in; a crash between the two renames leaves the old tree whole under that name, and
`recover` puts it back before the next assembly.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from pathlib import Path

AT_FDCWD = -100
RENAME_EXCHANGE = 2
_FALLBACK_ERRNOS = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP}


def previous(root: Path) -> Path:
    """Where the old tree waits while the fallback swap runs."""
    return root.with_name(root.name + ".previous")


def recover(root: Path) -> None:
    """Undo what a crash in the middle of a fallback swap left: the old tree back in place, or
    the set-aside copy removed when the new tree made it in."""
    aside = previous(root)
    if aside.exists() and not root.exists():
        aside.rename(root)
    elif aside.exists():
        shutil.rmtree(aside)


def swap_in(new: Path, root: Path) -> None:
    """Make new the tree at root; the old tree, if any, ends up at new's path."""
    if not root.exists():
        new.rename(root)
    elif not _exchange(new, root):
        aside = previous(root)
        root.rename(aside)
        new.rename(root)
        aside.rename(new)
    _sync_dir(root.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Swap a and b atomically; False when this system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _FALLBACK_ERRNOS:
        return False
    raise OSError(code, f"cannot swap {a} and {b}: {os.strerror(code)}")


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
