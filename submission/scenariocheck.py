"""Prechecks of one result folder: detail logs, validity, LoadGen errors, seeds, files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.loadgen_log import SEED_KEYS, DetailLog, read_detail
from bench.rules import RoundRules, Seeds, round_of_seeds
from lab.errors import RunError
from submission import treecheck
from submission.layout import (
    ACCURACY_JSON,
    ACCURACY_TXT,
    DETAIL,
    TESTS,
    VERIFY_ACCURACY,
    VERIFY_OUTPUT_LEN,
    VERIFY_PERFORMANCE,
    Layout,
    ResultKey,
    Style,
)
from submission.truncate import MAX_LOG_BYTES, accuracy_hash

if TYPE_CHECKING:
    from submission.precheck import Findings

TOLERATED_IN_TESTS = "Multiple conf files"  # the checker accepts it in TEST01/TEST04 logs
# what the prechecks read of a detail log (with its errors): four logs per result, read fast
KEYS = ("result_validity", *(f"effective_{key}" for key in SEED_KEYS))
VERIFY_FILES = (VERIFY_ACCURACY, VERIFY_PERFORMANCE, VERIFY_OUTPUT_LEN)


def result(found: Findings, layout: Layout, key: ResultKey, model: str | None,
           rules: RoundRules) -> None:
    """Every check of one results/<system>/<model>/<scenario> folder."""
    perf_path, acc_path = layout.run_1(key) / DETAIL, layout.accuracy_dir(key) / DETAIL
    for path, part in ((perf_path, "performance"), (acc_path, "accuracy")):
        if not path.is_file():
            found.add(f"missing-{part}-detail", "crash", path, f"{part} detail log missing: the "
                      "checker crashes (TypeError) without printing a summary", key=key, part=part)
    if perf_path.is_file():
        _run_log(found, key, "performance", perf_path, rules, tolerate="")
    if acc_path.is_file() and (log := _detail(found, key, "accuracy", acc_path)) is not None:
        _errors(found, key, "accuracy", log, tolerate="")
    _accuracy_files(found, layout, key)
    _tests(found, layout, key, model, rules)
    _measurements(found, layout, key)
    implementation = _implementation_json(layout, key)
    for path, message in treecheck.file_sets(layout, key, implementation):
        found.add("file-set", "error", path, message, key=key, part=_part(layout, key, path))


def _run_log(found: Findings, key: ResultKey, part: str, path: Path, rules: RoundRules,
             *, tolerate: str) -> None:
    log = _detail(found, key, part, path)
    if log is None:
        return
    validity = log.get("result_validity")
    if validity != "VALID":
        found.add("invalid-run", "error", path, f"result_validity is {validity}: the "
                  "official checker does not look and would accept it. Re-run with settings "
                  "that make the run VALID (see the run's verdict).", key=key, part=part)
    _errors(found, key, part, log, tolerate=tolerate)
    seeds = log.seeds
    if seeds != rules.seeds:
        other = _seed_round(seeds)
        whose = f"the seeds of {other}" if other else "seeds of no known round"
        found.add("wrong-seeds", "error", path, f"this log carries {whose}, not "
                  f"{rules.round}'s: the LoadGen build belongs to another round, or user.conf "
                  "overrides a seed. Use the LoadGen release of the round "
                  f"({rules.loadgen_release or 'see bench/rounds'}).", key=key, part=part)


def _seed_round(seeds: Seeds | None) -> str | None:
    return round_of_seeds(seeds) if seeds is not None else None


def _detail(found: Findings, key: ResultKey, part: str, path: Path) -> DetailLog | None:
    """The log's facts, or None (and a finding) when the checker's parser would raise on it."""
    try:
        return read_detail(path, KEYS)
    except RunError:
        found.add("not-a-detail-log", "crash", path, "does not start with :::MLLOG: the "
                  "checker's parser raises on it", key=key, part=part)
        return None


def _errors(found: Findings, key: ResultKey, part: str, log: DetailLog, *,
            tolerate: str) -> None:
    errors = [e for e in log.error_lines if not (tolerate and tolerate in e)]
    if errors:
        silent = " (the checker lets these pass in performance logs)" if part != "accuracy" \
            else ""
        found.add("loadgen-errors", "error", Path(log.source), f"{len(errors)} LoadGen "
                  f"error(s){silent}: " + "; ".join(errors[:3]), key=key, part=part)


def _accuracy_files(found: Findings, layout: Layout, key: ResultKey) -> None:
    folder = layout.accuracy_dir(key)
    text_path, log_path = folder / ACCURACY_TXT, folder / ACCURACY_JSON
    if text_path.is_file() and accuracy_hash(text_path.read_text(errors="replace")) is None:
        found.add("no-hash", "error", text_path, "no hash= line; truncate the accuracy log with "
                  "its hash (subrun does this when it assembles)", key=key, part="accuracy")
    if log_path.is_file() and log_path.stat().st_size > MAX_LOG_BYTES:
        found.add("not-truncated", "error", log_path, f"{log_path.stat().st_size} bytes; the "
                  "checker wants at most 10 KiB (truncated)", key=key, part="accuracy")


def _tests(found: Findings, layout: Layout, key: ResultKey, model: str | None,
           rules: RoundRules) -> None:
    required = rules.model(model).compliance if model else None
    if layout.division != "open" and required:
        for test in required:
            if not layout.test_dir(key, test.value).is_dir():
                found.add("missing-test", "error", layout.test_dir(key, test.value),
                          f"{model} needs {test.value} in this division", key=key)
    for name in TESTS:
        detail = layout.test_run_1(key, name) / DETAIL
        if detail.is_file():
            _run_log(found, key, name, detail, rules, tolerate=TOLERATED_IN_TESTS)
        for verify in VERIFY_FILES:
            path = layout.test_dir(key, name) / verify
            if path.is_file() and not _verified(path):
                found.add("compliance-failed", "error", path, f"{name} verification did not "
                          "pass (no 'TEST PASS' line); re-run the test or investigate the SUT",
                          key=key, part=name)


def _verified(path: Path) -> bool:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    if "TEST PASS" in lines or any("TEST PASS" in line for line in lines):
        return True
    # TEST06 writes per-check lines instead of TEST PASS
    checks = [line for line in lines if line.endswith(("pass: True", "pass: False",
                                                       "pass: Skipped"))]
    return bool(checks) and not any(line.endswith("pass: False") for line in checks)


def _measurements(found: Findings, layout: Layout, key: ResultKey) -> None:
    for path in (layout.user_conf(key), layout.readme(key)):
        if path.is_file() and path.stat().st_size == 0:
            found.add("empty-file", "error", path, "is empty; the checker refuses an empty "
                      f"{path.name}", key=key)


def _implementation_json(layout: Layout, key: ResultKey) -> str:
    if layout.style is Style.V6:
        return ""
    folder = layout.measurement_dir(key)
    names = sorted(p.name for p in folder.glob(f"{key.system}*.json")) if folder.is_dir() else []
    return names[0] if names else f"{key.system}_<implementation>_{key.scenario}.json"


def _part(layout: Layout, key: ResultKey, path: Path) -> str:
    for base in (layout.compliance_dir(key), layout.scenario_dir(key)):
        try:
            return path.relative_to(base).parts[0]
        except (ValueError, IndexError):
            continue
    return ""
