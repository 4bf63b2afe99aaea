"""A power result in the tree: power-dev's output, stored as a power run's attempt, placed by
assembly byte for byte (performance/power, ranging, run_1 with spl.txt), then read by the
prechecks and the official submission checker."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.rules import load_rules
from bench.store import RunStore
from bench.verdict import judge_dir
from submission.assemble import TreeRequest, assemble
from submission.checker import run_checker
from submission.inputs import StoredRun, SystemInput
from submission.precheck import precheck
from testkit.official import INFERENCE
from testkit.submission_runs import SYSTEM, real_runs, runs_of, spec_for, tiny_benchmark

RULES = load_rules("v6.1")
POWER_FILES = {"power": {"client.json", "client.log", "ptd_logs.txt", "server.json",
                         "server.log"},
               "ranging": {"mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt"},
               "run_1": {"mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt"}}


def stored_power_run(out: Path, store: RunStore) -> StoredRun:
    """power-dev's output folder as the attempt of an Offline power run."""
    spec = spec_for("Offline", "power", settings={"min_duration": 12000})
    verdict = judge_dir(spec, out / "run_1", RULES)
    record = store.add_attempt(spec, out, verdict=verdict, exit_status=0)
    return StoredRun(record, store.path(record.key, record.attempt))


def check_tree_with_official_power(out: Path, tmp_path: Path,
                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    store = real_runs(tmp_path_factory.getbasetemp() / "submission-runs")
    power = stored_power_run(out, RunStore(tmp_path / "power-store"))
    assert power.passed, power.record.verdict
    root = tmp_path / "tree"
    request = TreeRequest(root=root, division="closed", submitter="ACME", round="v6.1",
                          required_tests=lambda m: [k.value for k in
                                                    RULES.model(m).compliance or ()])
    index = assemble(request, [*runs_of(store), power], {"local": SystemInput("tinybox", SYSTEM)},
                     {"tiny": tiny_benchmark(tmp_path / "ctx")})
    offline = next(r for r in index.results if r.scenario == "Offline")
    assert offline.power_in_tree and offline.run_for("performance") == offline.runs["power"]
    performance = root / offline.folder / "performance"
    assert {p.name: {f.name for f in p.iterdir()} for p in performance.iterdir()} == POWER_FILES
    recorded = json.loads((performance / "power" / "server.json").read_text())["results"]
    for name, sha1 in recorded.items():  # the files power-dev hashed, unchanged
        if (performance / name).exists():
            assert hashlib.sha1((performance / name).read_bytes()).hexdigest() == sha1, name
    scenario_files = {p.name for p in (root / offline.folder).iterdir() if p.is_file()}
    assert {"analyzer_table.md", "power_settings.md"} <= scenario_files
    assert "YokogawaWT310E" in (root / offline.folder / "analyzer_table.md").read_text()
    report = precheck(root, RULES)
    assert not [f for f in report.findings if f.result.endswith("Offline")], report.summary()

    assert INFERENCE is not None, "the official inference checkout is missing"
    outcome = run_checker(root, INFERENCE, "v6.1", work_dir=tmp_path / "checker")
    assert not outcome.crashed, outcome.traceback
    offline_errors = outcome.errors_for("tinybox/resnet/Offline")
    # the file sets and the power metric pass; power-dev's check refuses our daemon's identity
    assert not [e for e in offline_errors if "file list mismatch" in e or "no power samples" in e]
    assert any("power_checker.py did not pass" in e for e in offline_errors)
