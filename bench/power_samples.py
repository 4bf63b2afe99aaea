"""Power sample logs as values: the one reader of `Time,<stamp>,Watts,...` lines.

PTDaemon writes them to its `-l` log and answers `RL` with them; power-dev's server keeps a
phase's samples as `spl.txt`; subrun's daemon writes the same lines. The stamp format is also
LoadGen's `power_begin`/`power_end`, so both logs meet on one clock: UTC, MM-DD-YYYY
HH:MM:SS.mmm. Pure functions over text, plus one that reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lab.errors import PowerError

TIME_FORMAT = "%m-%d-%Y %H:%M:%S.%f"


def format_time(moment: datetime) -> str:
    """MM-DD-YYYY HH:MM:SS.mmm in UTC, as PTDaemon and LoadGen's power_begin write it."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%m-%d-%Y %H:%M:%S.") + f"{utc.microsecond // 1000:03d}"


def parse_time(text: str) -> datetime:
    """The UTC datetime of an MM-DD-YYYY HH:MM:SS.mmm stamp; ValueError for anything else."""
    return datetime.strptime(text.strip(), TIME_FORMAT).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Sample:
    """One analyzer reading at one instant."""

    time: datetime
    watts: float
    volts: float
    amps: float
    pf: float

    def values(self) -> str:
        """`Watts,<w>,Volts,<v>,Amps,<a>,PF,<pf>` with six decimals, as PTDaemon writes them."""
        return f"Watts,{self.watts:f},Volts,{self.volts:f},Amps,{self.amps:f},PF,{self.pf:f}"

    def rl_line(self) -> str:
        """The sample as `RL` returns it: no Mark (power-dev's server inserts its own)."""
        return f"Time,{format_time(self.time)},{self.values()}"

    def log_line(self, mark: str) -> str:
        """The sample as a `-l` log or spl.txt line, with its Mark."""
        return f"{self.rl_line()},Mark,{mark}"


def parse_sample_line(line: str) -> tuple[Sample, str | None] | None:
    """A `Time,<stamp>,Watts,..,Volts,..,Amps,..,PF,..[,Mark,<m>]` line, or None for others."""
    fields = line.strip().split(",")
    if len(fields) < 10 or fields[0] != "Time" or fields[2] != "Watts":
        return None
    if (fields[4], fields[6], fields[8]) != ("Volts", "Amps", "PF"):
        return None
    try:
        sample = Sample(parse_time(fields[1]), float(fields[3]), float(fields[5]),
                        float(fields[7]), float(fields[9]))
    except ValueError:
        return None
    mark = fields[11] if len(fields) >= 12 and fields[10] == "Mark" else None
    return sample, mark


def parse_samples(text: str) -> list[Sample]:
    """The samples of an spl.txt (or `-l` log) text, in order; other lines are skipped."""
    return [parsed[0] for line in text.splitlines()
            if (parsed := parse_sample_line(line)) is not None]


def read_samples(path: Path) -> list[Sample]:
    """The samples of an spl.txt (or `-l` log) file, in order."""
    try:
        return parse_samples(Path(path).read_text(errors="replace"))
    except OSError as e:
        raise PowerError(f"{path}: cannot read the power sample log: {e.strerror}. Check that "
                         "the power run's files were collected.") from e
