"""Copy one run's files from the run store to their folders in the tree, exactly the set expected.

Only the files the checkers list are copied (never LoadGen's trace, never ptd_out.txt); accuracy
logs go through truncation with their hash; the full logs stay in the store.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.run import RunKind
from lab.errors import RunError
from submission import documents
from submission.inputs import BenchmarkInput, StoredRun, SystemInput
from submission.layout import (
    ACCURACY_JSON,
    ACCURACY_TXT,
    ANALYZER_TABLE,
    DETAIL,
    FOLDER_RULES,
    POWER_FILES,
    POWER_SETTINGS,
    SPL,
    SUMMARY,
    Layout,
    ResultKey,
)
from submission.truncate import hashed_accuracy_text, truncate_accuracy_log

MAX_FILE_BYTES = 50 * 1024 * 1024  # the old checker's FILE_SIZE_LIMIT_MB
SKIPPED_NAMES = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
FALLBACK_FILES = ("baseline_accuracy.txt", "compliance_accuracy.txt")


def official_power(run: StoredRun) -> bool:
    """Whether a power run holds the official power-dev client/server output (submittable)."""
    return all(run.file(f"power/{name}") for name in POWER_FILES)


def result(layout: Layout, key: ResultKey, bench: BenchmarkInput,
           runs: Mapping[RunKind, StoredRun]) -> list[str]:
    """Write one result's folders: performance (or power), accuracy, TESTxx, measurements;
    return warnings."""
    warnings = []
    power_run = runs.get(RunKind.POWER)
    if power_run is not None and official_power(power_run):
        power(layout, key, power_run)
    else:
        if power_run is not None:
            warnings.append(f"{power_run.spec.label}: measured by subrun's own daemon, not the "
                            "official power-dev client and server, so it stays out of the tree "
                            "(the report shows it)")
        performance = runs.get(RunKind.PERFORMANCE)
        if performance is not None:
            _copy(performance, (SUMMARY, DETAIL), layout.run_1(key))
        elif power_run is not None:  # its testing run is a performance run like any other
            _copy(power_run, (f"run_1/{SUMMARY}", f"run_1/{DETAIL}"), layout.run_1(key))
    accuracy(layout, key, runs[RunKind.ACCURACY])
    for kind, run in runs.items():
        if kind.is_compliance:
            test(layout, key, kind.value, run)
    main = runs.get(RunKind.PERFORMANCE) or runs[RunKind.POWER]
    measurement = layout.measurements_json(key, bench.implementation)
    _write(measurement, documents.measurements_json(bench))
    conf = main.file("user.conf")
    text = conf.read_text() if conf else ""
    _write(layout.user_conf(key), text if text.strip() else documents.user_conf(main.spec, "*"))
    return warnings


def accuracy(layout: Layout, key: ResultKey, run: StoredRun) -> None:
    """accuracy/: both logs, the truncated accuracy log and accuracy.txt with its hash line."""
    folder = layout.accuracy_dir(key)
    _copy(run, (SUMMARY, DETAIL), folder)
    truncated = truncate_accuracy_log(_need(run, ACCURACY_JSON), folder / ACCURACY_JSON)
    text = _need(run, ACCURACY_TXT).read_text()
    _write(folder / ACCURACY_TXT, hashed_accuracy_text(text, truncated.sha256,
                                                       source=f"{run.folder}/{ACCURACY_TXT}"))


def test(layout: Layout, key: ResultKey, name: str, run: StoredRun) -> None:
    """TESTxx/: the verification files, its performance logs and its (truncated) accuracy log."""
    rule = FOLDER_RULES[name]
    folder = layout.test_dir(key, name)
    _copy(run, tuple(sorted(rule.required)), folder)
    if "performance" in rule.folders and run.file(DETAIL):
        _copy(run, (SUMMARY, DETAIL), layout.test_run_1(key, name))
    log = run.file(ACCURACY_JSON)
    wants_log = name in ("TEST01", "TEST06")
    if wants_log and log is None:
        raise RunError(f"Run {run.spec.label} (folder {run.folder}) has no {ACCURACY_JSON}; "
                       f"{name} needs it in {name}/accuracy. Re-collect or re-run {name}.")
    if log is None or "accuracy" not in rule.folders:
        return
    acc = layout.test_accuracy_dir(key, name)
    truncated = truncate_accuracy_log(log, acc / ACCURACY_JSON)
    own = run.file(ACCURACY_TXT)
    # the old checker and preprocess_submission want accuracy.txt next to the TEST01 log
    text = own.read_text() if own else ""
    _write(acc / ACCURACY_TXT, hashed_accuracy_text(text.rstrip("\n"), truncated.sha256)
           .lstrip("\n"))
    for extra in FALLBACK_FILES:
        if found := run.file(extra):
            shutil.copyfile(found, acc / extra)


def power(layout: Layout, key: ResultKey, run: StoredRun) -> None:
    """performance/{run_1,ranging,power}: the power client's files, byte for byte (they are
    hashed in client.json and server.json)."""
    for phase, folder in (("run_1", layout.run_1(key)), ("ranging", layout.ranging(key))):
        _copy(run, tuple(f"{phase}/{n}" for n in (SUMMARY, DETAIL, SPL)), folder)
    _copy(run, tuple(f"power/{n}" for n in POWER_FILES), layout.power(key))
    for doc in (ANALYZER_TABLE, POWER_SETTINGS):
        found = run.file(doc)
        _write(layout.scenario_dir(key) / doc,
               found.read_text() if found else documents.power_doc(doc, run))


def system(layout: Layout, description: SystemInput, division: str, submitter: str) -> None:
    """systems/<id>.json, with division and submitter set to the tree's (the checker compares)."""
    data = {**description.description, "division": division, "submitter": submitter}
    _write(layout.system_json(description.system_id), json.dumps(data, indent=2) + "\n")
    if description.power_yaml:
        _write(layout.system_power_yaml(description.system_id), description.power_yaml)


def source(layout: Layout, bench: BenchmarkInput, runs: Sequence[StoredRun]) -> list[str]:
    """src/<image> for each build context of the benchmark's image chain (minus hidden, cache
    and oversize files), with BUILD_INFO.md in the benchmark's own folder."""
    warnings: list[str] = []
    for name, context in bench.contexts:
        dst = layout.src_benchmark_dir(bench.model, name)
        for path in sorted(Path(context).rglob("*")):
            rel = path.relative_to(context)
            if not path.is_file() or any(p in SKIPPED_NAMES or p.startswith(".")
                                         for p in rel.parts):
                continue
            if " " in str(rel) or path.stat().st_size > MAX_FILE_BYTES:
                warnings.append(f"src/{name}/{rel} left out: a name with a space or a file over "
                                "50 MB is refused in a submission tree")
                continue
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dst / rel)
    own = layout.src_benchmark_dir(bench.model, bench.name)
    _write(own / "BUILD_INFO.md", documents.build_info(bench, runs))
    return warnings


def tidy(root: Path) -> list[str]:
    """Remove empty folders (the checkers refuse them); return what was removed."""
    removed = []
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
            removed.append(f"empty folder {folder.relative_to(root)} removed")
    return removed


def _need(run: StoredRun, name: str) -> Path:
    found = run.file(name)
    if found is None:
        raise RunError(f"Run {run.spec.label} (key {run.record.key}, attempt "
                       f"{run.record.attempt}) has no {name} in {run.folder}. The run store copy "
                       "is incomplete: re-collect the run, or delete the attempt and re-run it.")
    return found


def _copy(run: StoredRun, names: Sequence[str], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(_need(run, name), folder / Path(name).name)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
