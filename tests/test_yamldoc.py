"""The capped YAML reader: each cap lets the largest honest file through and refuses one more."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from lab.errors import ConfigError
from lab.yamldoc import MAX_BYTES, MAX_DEPTH, MAX_VALUES, read_document


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "f.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def nested(depth: int) -> str:
    """A document depth levels deep: the top mapping, then lists."""
    return "x: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"


def test_depth_cap(tmp_path: Path) -> None:
    assert read_document(write(tmp_path, nested(MAX_DEPTH)))[1]
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
        read_document(write(tmp_path, nested(MAX_DEPTH + 1)))


def test_value_cap_counts_every_alias_in_full(tmp_path: Path) -> None:
    # the top map, its two keys, a's list of 8332 values, and b's 11 repeats of that list:
    # 3 + 8333 + 1 + 11 x 8333 = 100000 values
    text = f"a: &a [{', '.join(['x'] * 8332)}]\nb: [{', '.join(['*a'] * 11)}]\n"
    assert MAX_VALUES == 100_000
    assert read_document(write(tmp_path, text))[1]["b"][10] == ["x"] * 8332
    with pytest.raises(ConfigError, match="aliases are expanded"):
        read_document(write(tmp_path, text.replace("[x, ", "[x, x, ", 1)))


def test_size_cap(tmp_path: Path) -> None:
    fits = "a: 1\n" + "#" * (MAX_BYTES - 6) + "\n"
    assert len(fits.encode()) == MAX_BYTES
    assert read_document(write(tmp_path, fits))[1] == {"a": 1}
    with pytest.raises(ConfigError, match="larger than 256 KiB"):
        read_document(write(tmp_path, fits + "\n"))


def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    outcome: list[str] = []
    reader = threading.Thread(target=lambda: outcome.append(_error_of(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # free the blocked reader before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a pipe waited for a writer")
    assert "is not a regular file" in outcome[0]


def _error_of(path: Path) -> str:
    try:
        read_document(path)
    except ConfigError as e:
        return str(e)
    return "accepted"


@pytest.mark.parametrize(("text", "expected"), [
    ("a: " + "9" * 5000 + "\n", r":1:4: .*a value cannot be read \(Exceeds the limit"),
    ("a: 2001-13-45\n", r":1:4: .*a value cannot be read \(month must be in 1\.\.12\)"),
    ("a: !!python/object/apply:os.system [true]\n", r":1:4: .*could not determine a construct"),
    ("a: 1\n---\nb: 2\n", r":2:1: .*but found another document"),
])
def test_what_python_cannot_build_is_an_error_with_a_position(tmp_path: Path, text: str,
                                                              expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        read_document(write(tmp_path, text))


def test_a_utf8_bom_and_crlf_are_fine_and_positions_count_characters(tmp_path: Path) -> None:
    assert read_document(write(tmp_path, b"\xef\xbb\xbfa: 1\r\nb: 2\r\n"))[1] == {"a": 1, "b": 2}
    with pytest.raises(ConfigError, match=r":2:7: contains the control character U\+0007"):
        read_document(write(tmp_path, "a: é\nb: ééé\x07\n"))
