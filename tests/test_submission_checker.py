"""The official checker: its output parsed (captured real output), and, with a checkout of
mlcommons/inference (SUBRUN_INFERENCE_REPO), run on trees assembled from real LoadGen runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.rules import load_rules
from lab.errors import ConfigError
from submission.assemble import TreeRequest, assemble
from submission.checker import (
    checker_command,
    parse_checker_output,
    run_checker,
)
from submission.inputs import SystemInput
from submission.precheck import precheck
from testkit.official import INFERENCE
from testkit.submission_runs import SYSTEM, real_runs, runs_of, tiny_benchmark

SAMPLES = Path(__file__).parent / "samples" / "submission"
REPO = INFERENCE
needs_repo = pytest.mark.official("inference")
RULES = load_rules("v6.1")
# what the checker must say about short-mode runs, and nothing else
SHORT_MODE = ("Test duration less than 600s in user config", "Some performance checks Checks "
              "failed", "Some compliance check Checks failed")


def test_short_mode_output_is_read_per_result() -> None:
    text = (SAMPLES / "checker_short_mode.log").read_text()
    outcome = parse_checker_output(text, 1, (SAMPLES / "checker_summary.csv").read_text())
    assert not outcome.ok and not outcome.crashed
    assert outcome.summary == "SUMMARY: submission has errors"
    assert outcome.counts == {"results": 0, "no_results": 2, "power_results": 0}
    assert sorted(outcome.no_results) == ["tinybox/resnet/Offline", "tinybox/resnet/SingleStream"]
    offline = outcome.errors_for("tinybox/resnet/Offline")
    assert any("found=3000" in e for e in offline) and len(offline) >= 4
    assert outcome.csv_rows == []  # the CSV lists valid results only


def test_a_traceback_is_a_crash_even_without_summary() -> None:
    text = (SAMPLES / "checker_crash_no_system_json.log").read_text()
    outcome = parse_checker_output(text, 1, None)
    assert outcome.crashed and not outcome.ok and outcome.summary == ""
    assert outcome.traceback.startswith("Traceback") and "AttributeError" in outcome.traceback
    # exit status 0 does not make a crash a success
    assert not parse_checker_output(text, 0, None).ok


def test_a_clean_run_is_ok() -> None:
    text = ("[2026-11-21 20:00:00,000 main.py:230 INFO] Results /t/closed/A/results/s/resnet/"
            "Offline/performance/run_1/mlperf_log_detail.txt 1234.5\n"
            "[2026-11-21 20:00:00,000 main.py:315 INFO] Results=1, NoResults=0, Power Results=0\n"
            "[2026-11-21 20:00:00,000 main.py:364 INFO] SUMMARY: submission looks OK\n")
    outcome = parse_checker_output(text, 0, "Organization,Result\nA,1234.5\n")
    assert outcome.ok and outcome.results == {"s/resnet/Offline": "1234.5"}
    assert outcome.csv_rows == [{"Organization": "A", "Result": "1234.5"}]


def test_a_wrong_checkout_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a checkout of mlcommons/inference"):
        checker_command(tmp_path, tmp_path / "tree", "v6.1", tmp_path / "x.csv")


# ---- the real checker on trees from real runs ------------------------------------------------

@pytest.fixture(scope="module")
def closed_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = real_runs(tmp_path_factory.getbasetemp() / "submission-runs")
    root = tmp_path_factory.mktemp("checker") / "tree"
    request = TreeRequest(root=root, division="closed", submitter="ACME", round="v6.1",
                          required_tests=lambda m: [k.value for k in
                                                    RULES.model(m).compliance or ()])
    assemble(request, runs_of(store), {"local": SystemInput("tinybox", SYSTEM)},
             {"tiny": tiny_benchmark(root.parent / "ctx")})
    return root


@needs_repo
def test_checker_on_a_tree_of_real_short_runs(tmp_path: Path, closed_tree: Path) -> None:
    assert REPO is not None
    outcome = run_checker(closed_tree, REPO, RULES.checker_version, work_dir=tmp_path)
    assert not outcome.crashed, outcome.traceback
    placed = {p.name for p in (closed_tree / "closed/ACME/results/tinybox/resnet").iterdir()}
    assert set(outcome.no_results) == {f"tinybox/resnet/{s}" for s in placed}
    allowed = SHORT_MODE if len(placed) == 3 else (*SHORT_MODE, "does not have all required")
    unexpected = [e.message for e in outcome.errors if not any(a in e.message for a in allowed)]
    assert unexpected == []  # short durations are all the checker finds
    assert Path(outcome.log_path).is_file()


@needs_repo
def test_open_tree_of_real_short_runs(tmp_path: Path,
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    assert REPO is not None
    store = real_runs(tmp_path_factory.getbasetemp() / "submission-runs")
    root = tmp_path / "tree"
    request = TreeRequest(root=root, division="open", submitter="ACME", round="v6.1")
    system = {**SYSTEM, "division": "open"}
    bench = tiny_benchmark(tmp_path / "ctx")
    bench = bench.__class__(**{**bench.__dict__, "open_name": "tiny-net"})
    assemble(request, runs_of(store), {"local": SystemInput("tinybox", system)}, {"tiny": bench})
    outcome = run_checker(root, REPO, "v6.1", work_dir=tmp_path / "checker")
    assert not outcome.crashed and outcome.counts["no_results"] == 3
    unexpected = [e.message for e in outcome.errors if not any(a in e.message for a in SHORT_MODE)]
    assert unexpected == []  # model_mapping.json maps tiny-net to resnet: nothing else fails


def edit_json(path: Path, **changes: object) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


OFFLINE = "closed/ACME/results/tinybox/resnet/Offline"
CRASHES: list[tuple[str, Callable[[Path], None]]] = [
    ("missing-system-json", lambda r: (r / "closed/ACME/systems/tinybox.json").unlink()),
    ("invalid-system-type",
     lambda r: edit_json(r / "closed/ACME/systems/tinybox.json", system_type="desktop")),
    ("model-not-for-system-type",
     lambda r: shutil.copytree(r / "closed/ACME/results/tinybox/resnet",
                               r / "closed/ACME/results/tinybox/rgat")),
    ("missing-performance-detail",
     lambda r: (r / OFFLINE / "performance/run_1/mlperf_log_detail.txt").unlink()),
    ("missing-accuracy-detail",
     lambda r: (r / OFFLINE / "accuracy/mlperf_log_detail.txt").unlink()),
]


@needs_repo
@pytest.mark.parametrize(("code", "change"), CRASHES, ids=[c for c, _ in CRASHES])
def test_what_the_prechecks_call_a_crash_crashes_the_checker(
        tmp_path: Path, closed_tree: Path, code: str, change: Callable[[Path], None]) -> None:
    assert REPO is not None
    root = tmp_path / "tree"
    shutil.copytree(closed_tree, root)
    change(root)
    assert code in {f.code for f in precheck(root, RULES).by_severity("crash")}
    outcome = run_checker(root, REPO, "v6.1", work_dir=tmp_path / "checker")
    assert outcome.crashed and not outcome.ok and "Traceback" in outcome.traceback


@needs_repo
def test_official_truncation_tool_finds_nothing_left_to_do(tmp_path: Path,
                                                           closed_tree: Path) -> None:
    assert REPO is not None
    tool = REPO / "tools" / "submission" / "truncate_accuracy_log.py"
    done = subprocess.run([sys.executable, str(tool), "--input", str(closed_tree), "--submitter",
                           "ACME", "--output", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "already has hash and size seems truncated" in done.stderr
    assert " truncated" not in done.stderr.replace("seems truncated", "")
    for path in closed_tree.rglob("*"):  # and it left every file as we wrote it
        if path.is_file():
            twin = tmp_path / "out" / path.relative_to(closed_tree)
            assert twin.read_bytes() == path.read_bytes(), path
