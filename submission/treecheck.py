"""Tree rules that only the old checker (and reviewers) apply, and the exact file sets per folder.

reference/checker.md §8.5: no files in the root but *.md/*.pdf, no loose files in a division, no
hidden names, no spaces, no __pycache__, no broken symlinks, no file over 50 MB, no empty folder;
and every folder of a result holds exactly the files the reference lists (§1.1, §5.1, §6.5).
Each function returns (path, message) pairs, PathIssue; the precheck turns them into Findings.
"""

from __future__ import annotations

import os
from pathlib import Path

from submission.layout import (
    DIVISIONS,
    FOLDER_RULES,
    TESTS,
    FolderRule,
    Layout,
    ResultKey,
    Style,
    measurement_rule,
    scenario_rule,
)

MAX_FILE_BYTES = 50 * 1024 * 1024
PathIssue = tuple[Path, str]


def hygiene(root: Path) -> list[PathIssue]:
    """Every §8.5 rule that concerns names, sizes and emptiness, in one walk of the tree."""
    problems: list[PathIssue] = []
    for entry in _entries(root):
        if entry.is_file() and not entry.name.lower().endswith((".md", ".pdf")):
            problems.append((Path(entry.path), "a file in the submission root; only *.md and "
                             "*.pdf files may sit there"))
    for division in (root / d for d in DIVISIONS):
        for entry in _entries(division):
            if not entry.is_dir():
                problems.append((Path(entry.path), "a loose file directly in a division folder"))
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if not dirs and not files:
            problems.append((here, "an empty folder; the checkers refuse them, remove it"))
        for name in dirs + files:
            path = here / name
            problems += _name_problems(path, name)
        for name in files:
            path = here / name
            if path.is_symlink() and not path.exists():
                problems.append((path, "a broken symbolic link"))
            elif path.exists() and path.stat().st_size > MAX_FILE_BYTES:
                problems.append((path, f"{path.stat().st_size / 1e6:.0f} MB: files over 50 MB "
                                 "are refused; keep large logs in the run store"))
    return problems


def _name_problems(path: Path, name: str) -> list[PathIssue]:
    if name.startswith("."):
        return [(path, "a hidden file or folder; remove it")]
    if " " in name:
        return [(path, "a name with a space; rename it")]
    if name == "__pycache__":
        return [(path, "a __pycache__ folder; remove it")]
    return []


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def file_sets(layout: Layout, key: ResultKey, implementation_json: str = "") -> list[PathIssue]:
    """Folders of one result whose files are not the set the reference lists."""
    scenario = layout.scenario_dir(key)
    power = (layout.power(key)).is_dir()
    problems = _compare(scenario, scenario_rule(layout.style, power=power))
    if layout.style is Style.V5:
        problems += _compare(layout.measurement_dir(key),
                             measurement_rule(implementation_json, power=power))
    for rel, rule in FOLDER_RULES.items():
        base = layout.compliance_dir(key) if rel.split("/")[0] in TESTS else scenario
        if rel == "performance/run_1" and power:
            rule = FOLDER_RULES["performance/run_1+power"]
        if rel.endswith("+power"):
            continue
        folder = base / rel
        if folder.is_dir():
            problems += _compare(folder, rule)
    return problems


def _compare(folder: Path, rule: FolderRule) -> list[PathIssue]:
    entries = _entries(folder)
    files = {e.name for e in entries if e.is_file()}
    dirs = {e.name for e in entries if e.is_dir()}
    missing, unexpected = rule.mismatch(files)
    problems: list[PathIssue] = []
    if missing:
        problems.append((folder, f"missing {', '.join(sorted(missing))}"))
    if unexpected:
        problems.append((folder, f"unexpected file(s) {', '.join(sorted(unexpected))}: the "
                         "checkers compare this folder's files as an exact set"))
    extra_dirs = dirs - rule.folders
    if extra_dirs:
        problems.append((folder, f"unexpected folder(s) {', '.join(sorted(extra_dirs))}"))
    return problems
