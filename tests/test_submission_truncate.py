"""Accuracy-log truncation: the checker's rule (<= 10 KiB, head + marker + tail, hash line)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from lab.errors import RunError
from submission.truncate import (
    MAX_LOG_BYTES,
    accuracy_hash,
    hashed_accuracy_text,
    truncate_accuracy_log,
)


def loadgen_style_log(path: Path, entries: int) -> bytes:
    lines = [f'{{ "seq_id" : {i}, "qsl_idx" : {i * 7 % 1000}, "data" : "{i % 256:02X}" }}'
             for i in range(entries)]
    body = ("[\n" + ",\n".join(lines) + "\n]\n").encode()
    path.write_bytes(body)
    return body


@pytest.mark.parametrize("chunk_bytes", [1 << 20, 4096, 1000, 7])
def test_large_log_becomes_head_marker_tail(tmp_path: Path, chunk_bytes: int) -> None:
    src, dst = tmp_path / "full.json", tmp_path / "out" / "mlperf_log_accuracy.json"
    body = loadgen_style_log(src, 5000)
    result = truncate_accuracy_log(src, dst, chunk_bytes=chunk_bytes)
    written = dst.read_bytes()
    # the official tool's form: first 4096 and last 4096 characters around "\n\n...\n\n"
    assert written == body[:4096] + b"\n\n...\n\n" + body[-4096:]
    assert len(written) <= MAX_LOG_BYTES
    assert result.sha256 == hashlib.sha256(body).hexdigest()
    assert (result.full_bytes, result.written_bytes) == (len(body), len(written))
    assert src.read_bytes() == body  # the full log is untouched


def test_small_log_is_copied_whole(tmp_path: Path) -> None:
    src, dst = tmp_path / "full.json", tmp_path / "t.json"
    for entries in (0, 3, 120):
        body = loadgen_style_log(src, entries)
        assert len(body) <= 8199
        result = truncate_accuracy_log(src, dst, chunk_bytes=64)
        assert dst.read_bytes() == body
        assert result.sha256 == hashlib.sha256(body).hexdigest()


def test_hash_line_matches_the_checker_pattern() -> None:
    text = hashed_accuracy_text("accuracy=76.500%, good=38250, total=50000\n", "ab" * 32)
    lines = text.splitlines(keepends=True)
    hashes = [m.group(1) for line in lines if (m := re.match(r"^hash=([\w\d]+)$", line))]
    assert hashes == ["ab" * 32]
    assert lines[0].startswith("accuracy=76.500%")
    assert accuracy_hash(text) == "ab" * 32
    assert hashed_accuracy_text(text, "ab" * 32) == text  # idempotent


def test_stale_hash_is_refused() -> None:
    with pytest.raises(RunError, match="different runs"):
        hashed_accuracy_text("accuracy=1\nhash=" + "0" * 64 + "\n", "f" * 64)


def test_unreadable_log_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="Cannot read the accuracy log"):
        truncate_accuracy_log(tmp_path / "absent.json", tmp_path / "x.json")
