"""The run store: every attempt of every run, with its raw logs, checksums and record.

Layout: `<root>/<run key>/attempt-<n>/` holds the files collected from the run (copied and
checksummed on arrival) and `run.json`, the attempt's `RunRecord`. An attempt folder is created
once and its files are never overwritten: a re-run is a new attempt. Only `run.json` changes, as
the attempt moves from running to finished and gets its verdict (written atomically).
Resume reads it to skip finished runs and reattach running ones; assembly reads the latest
passing attempt of each run.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.run import RunRecord, RunSpec, RunState
from bench.submitted import reference, standing
from lab.errors import RunError

RUN_JSON = "run.json"
ATTEMPT = re.compile(r"^attempt-(\d+)$")
KEY = re.compile(r"^[A-Za-z0-9_-]+$")
CHUNK = 1 << 20
UPDATABLE = frozenset({"state", "finished_at", "exit_status", "log_tail", "verdict", "error",
                       "settle_s", "reverifies", "references", "telemetry", "withdrawn"})


class RunStore:
    """A local directory of runs and their attempts."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, key: str, attempt: int) -> Path:
        """The folder of one attempt."""
        if not KEY.match(key):
            raise RunError(f"'{key}' is not a run key (letters, digits, '-' and '_' only).")
        return self.root / key / f"attempt-{attempt}"

    def start_attempt(self, spec: RunSpec, *, started_at: datetime | None = None,
                      key: str | None = None) -> RunRecord:
        """Open a new attempt of a run (state running) in a folder of its own.

        `key` defaults to the spec's; an automatic re-run with adjusted settings passes the
        planned run's key, so all attempts of one planned run stay together."""
        key = key or spec.key
        base = self.root / key
        base.mkdir(parents=True, exist_ok=True)
        while True:
            attempt = max(self._attempt_numbers(key, recorded=False), default=0) + 1
            try:
                self.path(key, attempt).mkdir()  # atomic: a racing writer takes the next
                break
            except FileExistsError:
                continue
        record = RunRecord(spec=spec, key=key, attempt=attempt, state=RunState.RUNNING,
                           started_at=started_at or datetime.now(UTC))
        self._write(record)
        return record

    def add_files(self, key: str, attempt: int, source: Path) -> RunRecord:
        """Copy the files under source into the attempt, checksumming them as they arrive."""
        record = self.record(key, attempt)
        target = self.path(key, attempt)
        source = Path(source)
        if not source.is_dir():
            raise RunError(f"{source}: not a directory of collected files for run {key} "
                           f"attempt {attempt}.")
        files = dict(record.files)
        for item in sorted(p for p in source.rglob("*") if p.is_file()):
            name = item.relative_to(source).as_posix()
            if name == RUN_JSON or name in files:
                raise RunError(f"{target}: '{name}' is already stored for this attempt; files "
                               "of an attempt are never overwritten. Start a new attempt.")
            # a file on disk but not in the record is the leftover of an interrupted copy
            (target / name).unlink(missing_ok=True)
            files[name] = _copy_with_sha256(item, target / name)
        return self._save(record.model_copy(update={"files": files}))

    def add_attempt(self, spec: RunSpec, source: Path, **changes: Any) -> RunRecord:
        """Store a finished attempt from a directory of collected files, in one call."""
        record = self.start_attempt(spec, started_at=changes.pop("started_at", None))
        self.add_files(spec.key, record.attempt, source)
        changes.setdefault("state", RunState.FINISHED)
        changes.setdefault("finished_at", datetime.now(UTC))
        return self.update(spec.key, record.attempt, **changes)

    def update(self, key: str, attempt: int, **changes: Any) -> RunRecord:
        """Change state, finished_at, exit_status, log_tail, verdict or error of an attempt."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise RunError(f"Cannot update {', '.join(sorted(unknown))} of run {key}: only "
                           f"{', '.join(sorted(UPDATABLE))} change after an attempt starts.")
        record = self.record(key, attempt)
        try:
            updated = RunRecord.model_validate({**record.model_dump(), **changes})
        except ValidationError as e:
            raise RunError(f"Run {key} attempt {attempt}: invalid update: {e}") from e
        return self._save(updated)

    def record(self, key: str, attempt: int) -> RunRecord:
        """The record of one attempt."""
        path = self.path(key, attempt) / RUN_JSON
        try:
            return RunRecord.model_validate_json(path.read_text())
        except FileNotFoundError as e:
            raise RunError(f"{path}: no such attempt in the run store.") from e
        except OSError as e:
            raise RunError(f"{path}: the run record cannot be read ({e.strerror}). Check the "
                           "file's permissions and the disk.") from e
        except ValidationError as e:
            problem = e.errors()[0]
            where = "".join(f"{p}: " for p in problem["loc"][:1])
            raise RunError(f"{path}: the run record is empty or corrupt ({where}"
                           f"{problem['msg']}), so this attempt of run {key} cannot be read. "
                           "Move that attempt folder out of the store (its logs stay in it) and "
                           "run the campaign again: the run is then made again.") from e

    def attempts(self, key: str) -> list[RunRecord]:
        """Every attempt of a run, oldest first."""
        return [self.record(key, n) for n in sorted(self._attempt_numbers(key))]

    def latest(self, key: str) -> RunRecord | None:
        """The most recent attempt of a run, or None."""
        numbers = self._attempt_numbers(key)
        return self.record(key, max(numbers)) if numbers else None

    def standing(self, key: str) -> RunRecord | None:
        """The attempt that stands for the run (bench.submitted): its best passing performance
        measurement, or the latest passing attempt of any other kind; None when none passed."""
        return standing(self.attempts(key))

    def reference(self, key: str) -> RunRecord | None:
        """The attempt compliance tests are verified against (bench.submitted.reference)."""
        return reference(self.attempts(key))

    def keys(self) -> list[str]:
        """Keys of every run in the store."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and KEY.match(p.name)
                      and self._attempt_numbers(p.name))

    def runs(self) -> list[RunRecord]:
        """The latest attempt of every run."""
        return [r for r in (self.latest(k) for k in self.keys()) if r is not None]

    def verify(self, key: str, attempt: int) -> list[str]:
        """Stored files whose content no longer matches the checksum taken on arrival."""
        record, folder = self.record(key, attempt), self.path(key, attempt)
        return [name for name, digest in record.files.items()
                if not (folder / name).is_file() or _sha256(folder / name) != digest]

    def _attempt_numbers(self, key: str, *, recorded: bool = True) -> list[int]:
        """Attempt numbers of a run; recorded=False also counts folders still being opened."""
        base = self.root / key
        if not base.is_dir():
            return []
        return [int(m.group(1)) for p in base.iterdir() if (m := ATTEMPT.match(p.name))
                and (not recorded or (p / RUN_JSON).is_file())]

    def _save(self, record: RunRecord) -> RunRecord:
        self._write(record)
        return record

    def _write(self, record: RunRecord) -> None:
        path = self.path(record.key, record.attempt) / RUN_JSON
        tmp = path.with_name(f".{RUN_JSON}.{os.getpid()}.{threading.get_ident()}.tmp")
        with tmp.open("w") as f:  # durable before it replaces the old record: a power cut
            f.write(record.model_dump_json(indent=2))  # leaves the old one or the new one
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def _copy_with_sha256(source: Path, target: Path) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with source.open("rb") as src, target.open("xb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
