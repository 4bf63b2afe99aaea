"""A target that prints or holds far more than the controller keeps: memory stays bounded.

Measured as the peak RSS of this process, sampled while the transfer runs, over the local
transport and real SSH (lab host h2).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lab.errors import TransferFailed
from lab.host import Host
from lab.output import MIB
from tests.support.memory import peak_growth

pytestmark = pytest.mark.lab
PRINTED = 256 * MIB
MAX_GROWTH = 100 * MIB


def test_huge_output_keeps_only_its_end(any_host: Host) -> None:
    any_host.run(["echo", "warm"])  # the connection's own buffers are not the output's
    command = ["sh", "-c", f"head -c {PRINTED} /dev/zero; echo; echo the-end"]
    growth, result = peak_growth(lambda: any_host.run(command, timeout_s=120))
    cap = any_host.output_cap_bytes
    assert growth < MAX_GROWTH, f"RSS grew by {growth / MIB:.0f} MiB"
    assert result.truncated
    assert len(result.stdout) == cap
    assert result.stdout.endswith("\nthe-end\n")
    assert result.stdout_dropped_bytes == PRINTED + len("\nthe-end\n") - cap
    assert "output truncated" in result.tail(1)


def test_large_file_is_copied_in_chunks(any_host: Host, tmp_path: Path) -> None:
    remote = f"{any_host.work_dir}/big.bin"
    any_host.run(["sh", "-c", f'mkdir -p "$(dirname "$1")" && head -c {PRINTED // 2} '
                  '/dev/urandom > "$1"', "sh", remote], timeout_s=60)
    local = tmp_path / "big.bin"
    growth, copied = peak_growth(lambda: any_host.get(remote, local))
    assert growth < MAX_GROWTH, f"RSS grew by {growth / MIB:.0f} MiB"
    assert copied == PRINTED // 2 == local.stat().st_size
    digest = any_host.run(["sha256sum", remote]).stdout.split()[0]
    with local.open("rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == digest


def test_read_text_refuses_what_it_cannot_keep_whole(any_host: Host) -> None:
    path = f"{any_host.work_dir}/log.txt"
    any_host.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && head -c 2048 /dev/zero | '
                  'tr "\\0" x > "$1"', "sh", path])
    any_host.output_cap_bytes = 4096
    assert any_host.read_text(path) == "x" * 2048
    any_host.output_cap_bytes = 1024
    with pytest.raises(TransferFailed, match="longer than the 1024 bytes"):
        any_host.read_text(path)
