"""What assembly reads: stored runs, system descriptions, benchmark sources, and which runs count.

These are narrow values so the tree can be built from any run store, collector or manifest that
can produce them; `submission.sources` adapts the project's own store and manifests to them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bench.run import RunId, RunRecord, RunSpec
from bench.submitted import passed, reference, standing


@dataclass(frozen=True)
class StoredRun:
    """One attempt of a run in the run store: its record and the folder holding its files."""

    record: RunRecord
    folder: Path

    @property
    def spec(self) -> RunSpec:
        """The run's spec."""
        return self.record.spec

    @property
    def passed(self) -> bool:
        """Did this attempt pass (bench.submitted.passed)."""
        return passed(self.record)

    def file(self, name: str) -> Path | None:
        """The stored file called name (a relative path, or a bare file name found anywhere)."""
        direct = self.folder / name
        if direct.is_file():
            return direct
        # the logs may sit in a sub-folder (e.g. output/); prefer the shallowest match
        stored = sorted(self.record.files, key=lambda s: (s.count("/"), s))
        for candidate in stored:
            if _matches(candidate, name) and (self.folder / candidate).is_file():
                return self.folder / candidate
        found = [p for p in self.folder.rglob(PurePosixPath(name).name)
                 if p.is_file() and _matches(p.relative_to(self.folder).as_posix(), name)]
        return min(found, key=lambda p: (len(p.parts), str(p))) if found else None


def _matches(stored: str, name: str) -> bool:
    return stored == name or stored.endswith("/" + name)


@dataclass(frozen=True)
class SystemInput:
    """A system of the tree: its `system_desc_id` and the description JSON (collectors' output)."""

    system_id: str
    description: Mapping[str, Any]
    power_yaml: str | None = None  # systems/<id>_power.yaml text (v6.1, optional)


MEASUREMENT_FIELDS = ("input_data_types", "retraining", "starting_weights_filename",
                      "weight_data_types", "weight_transformations")


@dataclass(frozen=True)
class BenchmarkInput:
    """A benchmark's source and identity as the tree shows it (from images/<name>/)."""

    name: str  # folder under images/
    model: str  # official model name (closed), or the official benchmark an open model maps to
    contexts: tuple[tuple[str, Path], ...]  # (name, build context) of the image chain, root first
    version: str  # content hash of the build contexts
    open_name: str | None = None  # open division: the tree's model name, mapped via model_mapping
    implementation: str = "reference"  # v5 measurement file name part
    measurements: Mapping[str, str] = field(default_factory=dict)  # MEASUREMENT_FIELDS values
    notes: str = ""  # shown in each README
    command: Callable[[RunSpec], str] | None = None  # the exact command line that ran a spec


def latest_attempts(runs: Iterable[StoredRun], *, passing_only: bool = True,
                    accuracy_misses: bool = False) -> list[StoredRun]:
    """The standing attempt of each run (bench.submitted: a performance run's best passing
    measurement, any other run's latest passing attempt), or with passing_only=False the latest
    attempt whatever its verdict; in a stable order. With accuracy_misses, an accuracy run that
    missed only its target stands on that attempt (bench.submitted.reference)."""
    groups: dict[RunId, list[StoredRun]] = {}
    for run in runs:
        groups.setdefault(run.spec.run, []).append(run)
    chosen: dict[RunId, StoredRun] = {}
    for label, group in groups.items():
        if passing_only:
            pick = reference if accuracy_misses else standing
            record = pick(r.record for r in group)
            if record is not None:
                chosen[label] = next(r for r in group if r.record is record)
        else:
            chosen[label] = max(group, key=_order)
    return [chosen[k] for k in sorted(chosen, key=lambda k: tuple(str(p) for p in k))]


def _order(run: StoredRun) -> tuple[str, int]:
    return (run.record.started_at.isoformat(), run.record.attempt)
