"""A reproducible tar.gz of a submission tree and its sha256.

Entries are sorted, owners and times are zeroed, and the gzip header carries no time or name,
so the same tree always gives the same bytes and the same digest: the digest identifies the tree.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
from pathlib import Path

from pydantic import BaseModel

from lab.errors import RunError

CHUNK_BYTES = 1 << 20


class Tarball(BaseModel):
    """Where the archive is, its size and its sha256."""

    path: str
    sha256: str
    bytes: int
    files: int


def pack(root: Path, dest: Path) -> Tarball:
    """Write dest (a .tar.gz) holding root's contents under root's name; return its digest."""
    root, dest = Path(root), Path(dest)
    if not root.is_dir():
        raise RunError(f"Cannot pack {root}: there is no submission tree there. Assemble it first.")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    count = 0
    with open(partial, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(root):
            info = tar.gettarinfo(str(path), arcname=str(Path(root.name) / path.relative_to(root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_file():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
                count += 1
            else:
                tar.addfile(info)
    partial.replace(dest)
    return Tarball(path=str(dest), sha256=_sha256(dest), bytes=dest.stat().st_size, files=count)


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(folder)
        found += [here / d for d in dirs] + [here / f for f in sorted(files)]
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()
