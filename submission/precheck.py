"""Prechecks: what the official checker crashes on or silently lets through, before it runs.

Crash cases (reference/checker.md §1.3): results/<system> without systems/<system>.json, an
invalid system_type, a model not in the round's table for the system type, a missing
performance or accuracy detail log; non-integer node/accelerator counts (§2). Silent gaps (§4.4,
§8.5): INVALID runs, LoadGen errors in performance logs, seeds of another round, and the old
checker's tree rules and exact file sets. Each finding names the tree path, the result and,
through the tree's index, the run that caused it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from bench.rules import RoundRules
from submission import scenariocheck, systemcheck, treecheck
from submission.index import TreeIndex, read_index
from submission.layout import Layout, ResultKey, Style, find_layouts

Severity = Literal["crash", "error", "warning"]


class Finding(BaseModel):
    """One problem: what, where, which result and which run."""

    code: str
    severity: Severity
    path: str  # relative to the tree root
    message: str
    result: str = ""  # "<system>/<model>/<scenario>"
    run: str = ""  # the run's label, key and attempt, when known
    run_folder: str = ""  # its run-store folder

    def line(self) -> str:
        """The finding on one line, as printed."""
        who = f" [run {self.run}]" if self.run else ""
        return f"{self.severity.upper()} {self.code}: {self.path}: {self.message}{who}"


class PrecheckReport(BaseModel):
    """All findings over a tree, and how long finding them took."""

    root: str
    findings: list[Finding] = Field(default_factory=list)
    results_checked: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """No crash and no error (warnings allowed)."""
        return not any(f.severity in ("crash", "error") for f in self.findings)

    def by_severity(self, severity: Severity) -> list[Finding]:
        """The findings of one severity."""
        return [f for f in self.findings if f.severity == severity]

    def summary(self) -> str:
        """One line: counts per severity."""
        counts = {s: len(self.by_severity(s)) for s in ("crash", "error", "warning")}
        state = "passed" if self.passed else "FAILED"
        return (f"prechecks {state}: {self.results_checked} results, {counts['crash']} crash, "
                f"{counts['error']} error, {counts['warning']} warning ({self.seconds:.2f} s)")


class Findings:
    """Collects findings, attributing each to the run behind the folder it concerns."""

    def __init__(self, root: Path, index: TreeIndex | None) -> None:
        self.root = root
        self.index = index
        self.items: list[Finding] = []

    def add(self, code: str, severity: Severity, path: Path, message: str, *,
            key: ResultKey | None = None, part: str = "") -> None:
        """Record a finding; part (performance, accuracy, TEST01...) names the run to blame."""
        result = f"{key.system}/{key.model}/{key.scenario}" if key else ""
        run, folder = "", ""
        placed = self.index.result(result) if (self.index and result) else None
        ref = placed.run_for(part) if (placed and part) else None
        if ref:
            run, folder = f"{ref.label} key {ref.key} attempt {ref.attempt}", ref.folder
        self.items.append(Finding(code=code, severity=severity, path=self._rel(path),
                                  message=message, result=result, run=run, run_folder=folder))

    def _rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def precheck(root: Path, rules: RoundRules, index: TreeIndex | None = None) -> PrecheckReport:
    """Check the tree at root against the round; the index (read beside the tree if not given)
    attributes findings to runs."""
    started = time.perf_counter()
    root = Path(root)
    index = index if index is not None else read_index(root)
    found = Findings(root, index)
    style = Style(rules.layout)
    for path, message in treecheck.hygiene(root):
        found.add("tree", "error", path, message)
    checked = 0
    for layout in find_layouts(root, style):
        systemcheck.submitter(found, layout)
        for key, model in _models_and_results(found, layout, rules):
            scenariocheck.result(found, layout, key, model, rules)
            checked += 1
    if checked == 0:
        found.add("empty", "error", root, "no result found under <division>/<submitter>/results")
    return PrecheckReport(root=str(root), findings=found.items, results_checked=checked,
                          seconds=time.perf_counter() - started)


def _models_and_results(found: Findings, layout: Layout,
                        rules: RoundRules) -> list[tuple[ResultKey, str | None]]:
    """The results of every system that the checker would get to, with their official model."""
    keys: list[tuple[ResultKey, str | None]] = []
    mapping = systemcheck.model_mapping(found, layout)
    by_system: dict[str, list[ResultKey]] = {}
    for key in layout.result_keys():
        by_system.setdefault(key.system, []).append(key)
    for system, system_keys in by_system.items():
        system_type = systemcheck.system(found, layout, system)
        if system_type is None:
            continue  # the checker crashes on this system before looking at its results
        for model_dir in sorted({k.model for k in system_keys}):
            model = systemcheck.model(found, layout, rules, system, model_dir, system_type,
                                      mapping, [k.scenario for k in system_keys
                                                if k.model == model_dir])
            keys += [(k, model) for k in system_keys if k.model == model_dir]
    return keys
