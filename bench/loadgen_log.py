"""LoadGen's logs as values, and the one reader of them: `mlperf_log_detail.txt` (the
`:::MLLOG {json}` lines the checker reads), `mlperf_log_summary.txt` (read by the TEST04
verification) and `mlperf_log_accuracy.json`. Verdicts, compliance, power and the prechecks
all read LoadGen's logs through here.

Like the checker, a key's value is that of its *first* entry; every entry is kept in order too.
An entry whose `metadata.is_error` is true is a LoadGen error, `is_warning` a warning.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.power_samples import parse_time
from bench.rules import Seeds
from lab.errors import RunError

DETAIL = "mlperf_log_detail.txt"
SUMMARY = "mlperf_log_summary.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"  # written by the benchmark's accuracy script, not LoadGen
MARKER = ":::MLLOG"
AUDIT_FOUND = "Found Audit Config file"
TEST05_FOUND = "Test05 flag detected"
ERROR_NEEDLE = '"is_error": true'
SEED_KEYS = ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")


class LogEntry(BaseModel):
    """One `:::MLLOG` line."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: Any = None
    time_ms: float | None = None
    is_error: bool = False
    is_warning: bool = False


class DetailLog(BaseModel):
    """A parsed mlperf_log_detail.txt."""

    model_config = ConfigDict(frozen=True)

    source: str = ""
    entries: tuple[LogEntry, ...] = ()
    values: dict[str, Any] = Field(default_factory=dict)  # first entry per key
    unparsed_lines: int = 0  # e.g. a last line cut short when a run was killed

    def get(self, key: str, default: Any = None) -> Any:
        """The value of the first entry with this key."""
        return self.values.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    @property
    def errors(self) -> list[LogEntry]:
        return [e for e in self.entries if e.is_error]

    @property
    def warnings(self) -> list[LogEntry]:
        return [e for e in self.entries if e.is_warning]

    @property
    def scenario(self) -> str | None:
        """The LoadGen scenario that ran (Interactive shows as Server)."""
        return self.get("effective_scenario")

    @property
    def test_mode(self) -> str | None:
        return self.get("effective_test_mode")

    @property
    def valid(self) -> bool:
        return self.get("result_validity") == "VALID"

    @property
    def effective(self) -> dict[str, Any]:
        """Effective settings, without the `effective_` prefix."""
        return _prefixed(self.values, "effective_")

    @property
    def requested(self) -> dict[str, Any]:
        """Requested settings, without the `requested_` prefix."""
        return _prefixed(self.values, "requested_")

    @property
    def results(self) -> dict[str, Any]:
        """Results (`result_*` keys, prefix removed) plus the early stopping keys."""
        found = _prefixed(self.values, "result_")
        found.update({k: v for k, v in self.values.items() if k.startswith("early_stopping")})
        return found

    @property
    def seeds(self) -> Seeds | None:
        """The effective seeds, or None when the log lacks them."""
        return _seeds(self.effective)

    @property
    def requested_seeds(self) -> Seeds | None:
        return _seeds(self.requested)

    @property
    def audit_config_found(self) -> bool:
        """LoadGen found audit.config in its working directory and applied it."""
        return any(AUDIT_FOUND in str(e.value) for e in self.warnings)

    @property
    def test05_applied(self) -> bool:
        return any(TEST05_FOUND in str(e.value) for e in self.warnings)

    @property
    def power_begin(self) -> datetime | None:
        """LoadGen's power window start (UTC), on the clock of the power sample logs."""
        return _power_time(self.get("power_begin"))

    @property
    def power_end(self) -> datetime | None:
        return _power_time(self.get("power_end"))

    @property
    def error_lines(self) -> list[str]:
        """Each LoadGen error as `key: value`."""
        return [f"{e.key}: {e.value}" for e in self.errors]

    @property
    def loadgen_version(self) -> str:
        return str(self.get("loadgen_version", ""))


def parse_detail(text: str, source: str = "", keys: Collection[str] | None = None) -> DetailLog:
    """Parse the text of mlperf_log_detail.txt; RunError when it is not a LoadGen detail log.

    With keys, only the entries of those keys and the errors are decoded: a line is tested as
    text first, so a reader that needs a few facts of many logs (the prechecks) stays fast."""
    wanted = None if keys is None else re.compile("|".join(
        re.escape(needle) for needle in (ERROR_NEEDLE, *(f'"key": "{key}"' for key in keys))))
    lines = text.splitlines()
    if not lines or not lines[0].startswith(MARKER):
        raise RunError(f"{source or 'detail log'}: not a LoadGen detail log (the first line does "
                       f"not start with '{MARKER}'). Collect mlperf_log_detail.txt from the run's "
                       "output directory.")
    entries: list[LogEntry] = []
    values: dict[str, Any] = {}
    unparsed = 0
    for line in lines:
        if not line.startswith(MARKER):
            continue
        if wanted is not None and not wanted.search(line):
            continue
        try:
            raw = json.loads(line[len(MARKER):])
            meta = raw.get("metadata") or {}
            entry = LogEntry(key=raw["key"], value=raw.get("value"), time_ms=raw.get("time_ms"),
                             is_error=bool(meta.get("is_error")),
                             is_warning=bool(meta.get("is_warning")))
        except (ValueError, KeyError, TypeError, AttributeError):
            unparsed += 1
            continue
        entries.append(entry)
        values.setdefault(entry.key, entry.value)
    return DetailLog(source=source, entries=tuple(entries), values=values,
                     unparsed_lines=unparsed)


def read_detail(path: Path, keys: Collection[str] | None = None) -> DetailLog:
    """Read and parse a mlperf_log_detail.txt file (only keys and errors, when keys are given)."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise RunError(f"{path}: cannot read the LoadGen detail log: {e.strerror}. Check that the "
                       "run's logs were collected.") from e
    return parse_detail(text, str(path), keys)


class SummaryLog(BaseModel):
    """A parsed mlperf_log_summary.txt: `name : value` lines, first occurrence wins."""

    model_config = ConfigDict(frozen=True)

    source: str = ""
    fields: dict[str, str] = Field(default_factory=dict)
    error_count: int = 0
    warning_count: int = 0

    @property
    def scenario(self) -> str | None:
        return self.fields.get("Scenario")

    @property
    def valid(self) -> bool:
        return self.fields.get("Result is") == "VALID"

    @property
    def target_latency_ns(self) -> str | None:
        return self.fields.get("target_latency (ns)")

    def score(self) -> float | None:
        """Throughput-like score as TEST04 compares it: samples/s, or 1e9 / early-stopping
        latency for SingleStream and MultiStream."""
        wanted = {"Offline": r"Samples per second$", "Server": r"Completed samples per second$",
                  "SingleStream": r"Early stopping (90th|90\.0th|99\.9th) percentile estimate$",
                  "MultiStream": r"Early stopping (99th|99\.0th) percentile estimate$"}
        pattern = wanted.get(self.scenario or "")
        for name, value in self.fields.items():
            if pattern and re.match(pattern, name):
                number = float(value)
                return 1e9 / number if self.scenario in ("SingleStream", "MultiStream") else number
        return None


def parse_summary(text: str, source: str = "") -> SummaryLog:
    """Parse the text of mlperf_log_summary.txt."""
    fields: dict[str, str] = {}
    counts = {"ERROR": 0, "warning": 0}
    for raw in text.splitlines():
        line = raw.strip().lstrip("*").strip()
        if found := re.match(r"^(\d+) (ERROR|warning)[sS]? encountered", line):
            counts[found.group(2)] = int(found.group(1))
            continue
        name, sep, value = line.partition(":")
        if sep and name.strip() and value.strip():
            fields.setdefault(name.strip(), value.strip())
    return SummaryLog(source=source, fields=fields, error_count=counts["ERROR"],
                      warning_count=counts["warning"])


def read_summary(path: Path) -> SummaryLog:
    """Read and parse a mlperf_log_summary.txt file."""
    path = Path(path)
    try:
        return parse_summary(path.read_text(errors="replace"), str(path))
    except OSError as e:
        raise RunError(f"{path}: cannot read the LoadGen summary log: {e.strerror}.") from e


def _prefixed(values: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}


def _seeds(settings: dict[str, Any]) -> Seeds | None:
    if not all(isinstance(settings.get(k), int) for k in SEED_KEYS):
        return None
    try:
        return Seeds(**{k: settings[k] for k in SEED_KEYS})
    except ValidationError:  # e.g. a negative seed: no round's
        return None


def _power_time(value: Any) -> datetime | None:
    try:
        return parse_time(str(value))
    except ValueError:
        return None



def locate_logs(run_dir: Path) -> Path:
    """The directory holding a run's LoadGen logs: run_dir itself or its `output/`."""
    run_dir = Path(run_dir)
    for candidate in (run_dir, run_dir / "output"):
        if (candidate / DETAIL).is_file():
            return candidate
    return run_dir / "output" if (run_dir / "output").is_dir() else run_dir


def iter_accuracy_log(path: Path) -> Iterator[dict[str, Any]]:
    """Entries of mlperf_log_accuracy.json one at a time. LoadGen writes one entry per line, so a
    large log is read in constant memory; a file laid out otherwise is parsed whole."""
    path = Path(path)
    with path.open() as f:
        head = f.readline().strip()
        first = f.readline().strip()
        if head != "[" or not (first.startswith("{") or first == "]"):
            yield from json.loads(path.read_text())
            return
        for number, line in enumerate(itertools.chain([first], f), start=2):
            text = line.strip().rstrip(",")
            if text in ("]", ""):
                continue
            try:
                yield json.loads(text)
            except ValueError as e:
                raise RunError(f"{path}:{number}: not a LoadGen accuracy log entry ({e}). The "
                               "file may be cut short; collect it again from the run.") from e
