"""Reading subrun's daemon's logs from its host in bounded memory.

The `-l` sample log takes every sample of every measurement for as long as the daemon serves
(weeks of runs); the console is capped by the daemon itself (`power.console_file`) but still
megabytes. Neither is read whole into the controller's memory:

- the samples of one mark are selected on the daemon's host (`grep -F`) and streamed line by
  line through a parser that keeps only those asked for, at most `MAX_SAMPLES`;
- the console (its previous part and its present file) is copied to a local file in chunks
  and filtered from there line by line.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from lab.errors import PowerError, TransferFailed
from lab.host import Host
from power import protocol
from power.console_file import DEFAULT_CONSOLE_MAX_BYTES
from power.protocol import Sample

SampleFilter = Callable[[Sample], bool]
MAX_SAMPLES = 2_000_000  # 23 days at one sample a second: more is not one run's measurement
CONSOLE_COPY_MAX_BYTES = 2 * DEFAULT_CONSOLE_MAX_BYTES  # per part; a larger one is skipped


def marked_samples(host: Host, log_path: str, mark: str, keep: SampleFilter | None = None,
                   *, max_samples: int = MAX_SAMPLES) -> list[Sample]:
    """The samples marked mark in the daemon's `-l` log (those keep accepts), in order."""
    found: list[Sample] = []
    overflow = False

    def take(line: str) -> None:
        nonlocal overflow
        parsed = protocol.parse_sample_line(line)
        if parsed is None or parsed[1] != mark or (keep is not None and not keep(parsed[0])):
            return
        if len(found) >= max_samples:
            overflow = True
            return
        found.append(parsed[0])

    result = host.run(["grep", "-F", "--", f",Mark,{mark}", log_path], check=False,
                      timeout_s=600, on_output=take)
    if result.exit_status > 1:
        raise PowerError(f"On host '{host.name}', the power daemon's sample log {log_path} "
                         f"could not be searched for mark '{mark}': {result.tail(3)}")
    if overflow:
        raise PowerError(f"On host '{host.name}', the power daemon's sample log {log_path} "
                         f"holds more than {max_samples} samples marked '{mark}': that is not "
                         "one run's measurement; start the daemon afresh with a new log.")
    return found


def copy_console(host: Host, console_path: str, dest: Path,
                 *, max_bytes: int = CONSOLE_COPY_MAX_BYTES) -> None:
    """The daemon's console, oldest line first, into the local file dest (in chunks)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="subrun-console-") as tmp, dest.open("wb") as out:
        for i, part in enumerate((f"{console_path}.1", console_path)):
            local = Path(tmp) / str(i)
            try:
                host.get(part, local, max_bytes=max_bytes)
            except TransferFailed as e:
                if host.exists(part):  # present but refused: say so instead of the lines
                    out.write(f"(console part {part} not copied: {e})\n".encode())
                continue
            with local.open("rb") as f:
                shutil.copyfileobj(f, out)


def console_tail(host: Host, paths: list[str], lines: int = 10) -> str:
    """The last lines of each of paths that has any (why a daemon failed to start)."""
    tails = []
    for path in paths:
        result = host.run(["tail", "-n", str(lines), path], check=False, timeout_s=30)
        if result.ok and result.stdout.strip():
            tails.append(result.stdout.rstrip("\n"))
    return "\n".join(tails) or "(the daemon printed nothing)"
