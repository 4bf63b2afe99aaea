"""The index of a tree: which run (key, attempt, store folder) produced each result folder.

It lives next to the tree (`<tree>.index.json`), never inside it. Prechecks use it to report a
problem against the run that caused it; the report uses it to say where each artefact lies.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from submission.inputs import StoredRun


class RunRef(BaseModel):
    """Enough to find a run again: its label, key, attempt and run-store folder."""

    label: str
    key: str
    attempt: int
    folder: str
    passed: bool = False
    reason: str = ""

    @classmethod
    def of(cls, run: StoredRun) -> RunRef:
        """The reference to a stored run."""
        verdict = run.record.verdict
        return cls(label=run.spec.label, key=run.record.key, attempt=run.record.attempt,
                   folder=str(run.folder), passed=run.passed,
                   reason=(verdict.reason if verdict else run.record.error))


class PlacedResult(BaseModel):
    """A result written to the tree, and the runs behind each of its folders."""

    system: str
    model_dir: str  # the folder name: official model, or the open-division name
    scenario: str
    host: str
    benchmark: str
    model: str  # the official model it is (or maps to)
    folder: str  # results/<system>/<model>/<scenario>, relative to the tree root
    runs: dict[str, RunRef] = Field(default_factory=dict)  # RunKind value -> run
    power_in_tree: bool = False  # the power run's folders are in the tree (official path)

    @property
    def result(self) -> str:
        """"<system>/<model>/<scenario>"."""
        return f"{self.system}/{self.model_dir}/{self.scenario}"

    def run_for(self, part: str) -> RunRef | None:
        """The run behind a sub-folder of the result: performance, accuracy, TEST01, ..."""
        if part == "performance":
            if self.power_in_tree or "performance" not in self.runs:
                return self.runs.get("power") or self.runs.get("performance")
            return self.runs["performance"]
        return self.runs.get(part)


class SkippedResult(BaseModel):
    """A result that could not enter the tree, and why."""

    host: str
    benchmark: str
    scenario: str
    reason: str
    runs: dict[str, RunRef] = Field(default_factory=dict)


class TreeIndex(BaseModel):
    """Everything assembly decided, saved next to the tree."""

    root: str
    division: str
    submitter: str
    round: str
    style: str = "v6"
    results: list[PlacedResult] = Field(default_factory=list)
    skipped: list[SkippedResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def result(self, result: str) -> PlacedResult | None:
        """The placed result "<system>/<model>/<scenario>", if any."""
        return next((r for r in self.results if r.result == result), None)


def index_path(root: Path) -> Path:
    """Where the index of the tree at root is kept: beside it, not in it."""
    return root.with_name(root.name + ".index.json")


def write_index(index: TreeIndex) -> Path:
    """Save the index beside its tree."""
    path = index_path(Path(index.root))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(index.model_dump_json(indent=2) + "\n")
    return path


def read_index(root: Path) -> TreeIndex | None:
    """The index saved beside the tree at root, or None when there is none."""
    path = index_path(root)
    return TreeIndex.model_validate_json(path.read_text()) if path.exists() else None
