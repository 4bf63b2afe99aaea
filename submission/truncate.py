"""Accuracy logs in the form the checker accepts: hashed in full, truncated to head and tail.

The official `truncate_accuracy_log.py` replaces `mlperf_log_accuracy.json` by its first 4096
and last 4096 characters around a `\\n\\n...\\n\\n` marker and appends
`hash=<sha256 of the full log>` to `accuracy.txt`; the checker then wants the JSON at most
10 KiB and the hash line present. We do the same while copying out of the run store, in one
streaming pass with a fixed buffer, so a multi-gigabyte log costs a few megabytes of memory and
the full log stays in the store.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import RunError

HEAD_BYTES = 4096
TAIL_BYTES = 4096
ELISION = b"\n\n...\n\n"
MAX_LOG_BYTES = 10 * 1024  # the checker's MAX_ACCURACY_LOG_SIZE
CHUNK_BYTES = 1 << 20
HASH_LINE = re.compile(r"^hash=([\w\d]+)$")  # the checker's pattern


@dataclass(frozen=True)
class TruncatedLog:
    """What truncation did: the full log's digest and size, and the size written."""

    sha256: str
    full_bytes: int
    written_bytes: int


def truncate_accuracy_log(src: Path, dst: Path, *, chunk_bytes: int = CHUNK_BYTES) -> TruncatedLog:
    """Copy src to dst as head + marker + tail (whole if already small); hash the full log."""
    digest = hashlib.sha256()
    head = bytearray()
    tail = b""
    total = 0
    try:
        with open(src, "rb") as f:
            if hasattr(os, "posix_fadvise"):  # a larger kernel read-ahead for one long pass
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while chunk := f.read(chunk_bytes):
                digest.update(chunk)
                total += len(chunk)
                if len(head) < HEAD_BYTES:
                    head += chunk[: HEAD_BYTES - len(head)]
                # keep only the last TAIL_BYTES seen, across chunk boundaries
                tail = (tail + chunk)[-TAIL_BYTES:]
    except OSError as e:
        raise RunError(f"Cannot read the accuracy log {src}: {e.strerror}. The run store copy is "
                       "missing or unreadable; re-collect the run or re-run it.") from e
    whole = total <= HEAD_BYTES + len(ELISION) + TAIL_BYTES  # truncating would not shrink it
    dst.parent.mkdir(parents=True, exist_ok=True)
    if whole:
        body = bytes(head) if total <= HEAD_BYTES else _read_small(src)
    else:
        body = bytes(head) + ELISION + tail
    dst.write_bytes(body)
    return TruncatedLog(sha256=digest.hexdigest(), full_bytes=total, written_bytes=len(body))


def _read_small(path: Path) -> bytes:
    # only reached for files of at most 8199 bytes
    return path.read_bytes()


def hashed_accuracy_text(text: str, sha256: str, *, source: str = "accuracy.txt") -> str:
    """accuracy.txt content with the hash line the checker requires, exactly as the tool adds it."""
    present = [m.group(1) for line in text.splitlines() if (m := HASH_LINE.match(line))]
    if present and present[-1] != sha256:
        raise RunError(f"{source} already carries hash={present[-1]}, but the accuracy log it "
                       f"belongs to hashes to {sha256}: the two files come from different runs. "
                       "Re-score the accuracy run so accuracy.txt matches its log.")
    if present:
        return text
    return f"{text}\nhash={sha256}\n"


def accuracy_hash(text: str) -> str | None:
    """The hash= value of an accuracy.txt, or None when it has none."""
    for line in text.splitlines():
        if m := HASH_LINE.match(line):
            return m.group(1)
    return None
