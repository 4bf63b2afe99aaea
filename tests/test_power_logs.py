"""The power daemon's sample log and console are read back in bounded memory, whatever their
size: the samples of one mark are selected on the daemon's host and streamed, the console is
copied in chunks (local transport; the SSH transport streams the same way)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lab.errors import PowerError
from lab.host import Detached
from lab.local import LocalHost
from lab.output import MIB
from power.daemon_logs import copy_console, marked_samples
from power.powerdev import logged_identity
from power.protocol import Sample
from tests.support.memory import peak_growth

LOG_BYTES = 200 * MIB
MAX_GROWTH = 48 * MIB
START = datetime(2026, 1, 5, 2, 0, tzinfo=UTC)


def _lines(mark: str, count: int, first: datetime) -> bytes:
    return "".join(Sample(first + timedelta(seconds=i), 140.0 + i % 7, 230.1, 0.61, 0.99)
                   .log_line(mark) + "\n" for i in range(count)).encode()


def test_a_200_mb_sample_log_is_searched_in_bounded_memory(tmp_path: Path) -> None:
    log = tmp_path / "samples.log"
    block = _lines("subrun-earlier-night", 9000, START)  # ~1 MiB of other runs' samples
    with log.open("wb") as f:
        for _ in range(LOG_BYTES // len(block) + 1):
            f.write(block)
        f.write(_lines("subrun-tonight", 3600, START + timedelta(days=1)))
        f.write(block[:4096].rsplit(b"\n", 1)[0] + b"\n")  # a later run, not ours
    assert log.stat().st_size >= LOG_BYTES
    host = LocalHost("local", str(tmp_path))
    window_start = START + timedelta(days=1, minutes=10)
    started = time.monotonic()
    growth, samples = peak_growth(lambda: marked_samples(
        host, str(log), "subrun-tonight", lambda s: s.time >= window_start))
    took_s = time.monotonic() - started
    assert growth < MAX_GROWTH, f"RSS grew by {growth / MIB:.0f} MiB"
    assert len(samples) == 3000 and samples[0].time == window_start
    assert took_s < 20, f"{took_s:.1f} s"


def test_samples_beyond_the_output_cap_are_all_read(tmp_path: Path) -> None:
    """A command keeps only the end of its output; the samples stream past that cap."""
    log = tmp_path / "samples.log"
    log.write_bytes(_lines("long-run", 20_000, START))  # ~2 MB, the host keeps 64 KiB
    host = LocalHost("local", str(tmp_path), output_cap_bytes=64 * 1024)
    samples = marked_samples(host, str(log), "long-run")
    assert len(samples) == 20_000 and samples[0].time == START
    with pytest.raises(PowerError, match="more than 1000 samples marked 'long-run'"):
        marked_samples(host, str(log), "long-run", max_samples=1000)


def test_a_missing_sample_log_is_named(tmp_path: Path) -> None:
    host = LocalHost("local", str(tmp_path))
    with pytest.raises(PowerError, match=r"samples\.log could not be searched"):
        marked_samples(host, str(tmp_path / "samples.log"), "any")


def test_the_console_is_copied_oldest_part_first(tmp_path: Path) -> None:
    remote = tmp_path / "daemon" / "console.log"
    remote.parent.mkdir()
    (remote.parent / "console.log.1").write_text("older\n")
    remote.write_text("newer\n")
    host = LocalHost("local", str(tmp_path))
    copy_console(host, str(remote), tmp_path / "copy" / "console.txt")
    assert (tmp_path / "copy" / "console.txt").read_text() == "older\nnewer\n"
    copy_console(host, str(remote), tmp_path / "capped.txt", max_bytes=3)
    capped = (tmp_path / "capped.txt").read_text()
    assert capped.count("(console part ") == 2 and "older" not in capped


def test_power_devs_identify_is_found_however_long_its_servers_log(tmp_path: Path) -> None:
    """power-dev's server logs every sample it reads; PTDaemon's Identify is near the start."""
    state_dir = tmp_path / "detached" / "power-server-wt"
    state_dir.mkdir(parents=True)
    identity = "YokogawaWT310E,daemon=subrun,version=0.1.0-subrun-not-SPEC-PTDaemon"
    samples = "\\n".join(f"Time,01-05-2026 02:00:{i % 60:02d}.000,Watts,140.0" for i in range(900))
    with (state_dir / "out.log").open("w") as f:
        f.write("INFO Analyzer [1] is sending to ptd: 'Hello'\n"
                "INFO Analyzer [1] recieved reply from ptd: 'Hello, PTDaemon here!'\n"
                "INFO Analyzer [1] is sending to ptd: 'Identify'\n"
                f"INFO Analyzer [1] recieved reply from ptd: '{identity}'\n")
        for _ in range(200):  # a long session: ~7 MB of logged RL replies
            f.write(f"INFO Analyzer [1] got reply from ptd: '{samples}'\n")
    host = LocalHost("local", str(tmp_path), output_cap_bytes=64 * 1024)
    handle = Detached("local", "power-server-wt", str(state_dir), 1)
    assert logged_identity(host, handle) == identity
