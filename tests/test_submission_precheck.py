"""Prechecks: each case the official checker crashes on, each case it lets through silently, and
the tree rules, found on copies of a tree assembled from real LoadGen runs and reported against
the run that caused them."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.rules import load_rules
from bench.store import RunStore
from submission.assemble import TreeRequest, assemble
from submission.index import RunRef, TreeIndex, read_index, write_index
from submission.inputs import StoredRun, SystemInput
from submission.precheck import Finding, precheck
from testkit.submission_runs import SYSTEM, one_run, real_runs, runs_of, tiny_benchmark

RULES = load_rules("v6.1")
V60_SEEDS = {"qsl_rng_seed": 2465351861681999779, "sample_index_rng_seed": 14276810075590677512,
             "schedule_rng_seed": 3936089224930324775}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[str, str]]]:
    """A closed tree from the shared real runs, and the findings it already has."""
    store = real_runs(tmp_path_factory.getbasetemp() / "submission-runs")
    root = tmp_path_factory.mktemp("base") / "tree"
    request = TreeRequest(root=root, division="closed", submitter="ACME", round="v6.1",
                          required_tests=lambda m: [k.value for k in
                                                    RULES.model(m).compliance or ()])
    assemble(request, runs_of(store), {"local": SystemInput("tinybox", SYSTEM)},
             {"tiny": tiny_benchmark(root.parent / "ctx")})
    return root, keys(precheck(root, RULES).findings)


@pytest.fixture(scope="module")
def odd_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StoredRun]:
    """Real runs the checker would accept but must not: INVALID, LoadGen errors, v6.0 seeds."""
    base = tmp_path_factory.mktemp("odd")
    store, work = RunStore(base / "store"), base / "work"
    offline = {"min_duration": 1000, "target_qps": 1000, "performance_sample_count_override": 1024}
    return {
        # 24,576 samples (the Offline minimum) take 0.5 s: short of min_duration, INVALID
        "invalid": one_run(store, work, "Offline", "performance", settings=offline),
        # user.conf loaded twice: LoadGen logs an error and drops its built-in mlperf.conf
        "errors": one_run(store, work, "Offline", "performance", user_conf_loads=2),
    }


def keys(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.code, f.path) for f in findings}


def mutate(tmp_path: Path, base: tuple[Path, set[tuple[str, str]]],
           change: Callable[[Path], None]) -> list[Finding]:
    """Copy the base tree, apply change, precheck; return the findings the change added."""
    root = tmp_path / "tree"
    shutil.copytree(base[0], root)
    shutil.copyfile(base[0].with_name("tree.index.json"), tmp_path / "tree.index.json")
    index = read_index(root)
    assert index is not None
    write_index(index.model_copy(update={"root": str(root)}))
    change(root)
    return [f for f in precheck(root, RULES).findings if (f.code, f.path) not in base[1]]


OFFLINE = "closed/ACME/results/tinybox/resnet/Offline"
SYSTEM_JSON = "closed/ACME/systems/tinybox.json"


def edit_system(root: Path, **changes: object) -> None:
    path = root / SYSTEM_JSON
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_the_base_tree_only_misses_what_its_runs_lacked(base: tuple[Path, set]) -> None:
    assert {code for code, _ in base[1]} <= {"missing-scenarios"}


# ---- what the official checker crashes on (reference/checker.md §1.3, §2) -------------------

@pytest.mark.parametrize(("change", "code", "part"), [
    (lambda r: (r / SYSTEM_JSON).unlink(), "missing-system-json", ""),
    (lambda r: edit_system(r, system_type="desktop"), "invalid-system-type", ""),
    (lambda r: edit_system(r, number_of_nodes="one"), "system-int-field", ""),
    (lambda r: (r / OFFLINE / "performance/run_1/mlperf_log_detail.txt").unlink(),
     "missing-performance-detail", "performance"),
    (lambda r: (r / OFFLINE / "accuracy/mlperf_log_detail.txt").unlink(),
     "missing-accuracy-detail", "accuracy"),
    (lambda r: (r / OFFLINE / "performance/run_1/mlperf_log_detail.txt").write_text("garbage\n"),
     "not-a-detail-log", "performance"),
])
def test_crash_cases(tmp_path: Path, base: tuple[Path, set], change: Callable[[Path], None],
                     code: str, part: str) -> None:
    added = mutate(tmp_path, base, change)
    assert code in {f.code for f in added}, [f.line() for f in added]
    finding = next(f for f in added if f.code == code)
    assert finding.severity == "crash"
    if part:  # reported against the run behind that folder
        assert finding.result == "tinybox/resnet/Offline"
        assert f"tiny/Offline/{part}" in finding.run and Path(finding.run_folder).is_dir()


@pytest.mark.parametrize(("model_dir", "code"), [
    ("rgat", "model-not-for-system-type"),  # rgat is a datacenter benchmark only
    ("retinanet", "unknown-model"),  # retired after v6.0
])
def test_model_outside_the_rounds_table_crashes(tmp_path: Path, base: tuple[Path, set],
                                                model_dir: str, code: str) -> None:
    def change(root: Path) -> None:
        results = root / "closed/ACME/results/tinybox"
        shutil.copytree(results / "resnet", results / model_dir)

    added = mutate(tmp_path, base, change)
    finding = next(f for f in added if f.code == code)
    assert finding.severity == "crash" and finding.path.endswith(f"tinybox/{model_dir}")


# ---- what it lets through silently (§4.4, §8.5) ---------------------------------------------

def swap_in(root: Path, run: StoredRun, part: str = "performance") -> None:
    """Put run's logs in the Offline result's folder and make the index say so."""
    folder = root / OFFLINE / ("performance/run_1" if part == "performance"
                               else f"{part}/performance/run_1")
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        found = run.file(name)
        assert found is not None
        shutil.copyfile(found, folder / name)
    index = read_index(root)
    assert index is not None
    placed = next(r for r in index.results if r.scenario == "Offline")
    placed.runs[part] = RunRef.of(run)
    write_index(TreeIndex.model_validate(index.model_dump()))


@pytest.mark.parametrize(("which", "codes", "message"), [
    ("invalid", {"invalid-run"}, "result_validity is INVALID"),
    ("errors", {"loadgen-errors"}, "Multiple conf files are used"),
])
def test_silent_cases_from_real_runs(tmp_path: Path, base: tuple[Path, set],
                                     odd_runs: dict[str, StoredRun], which: str,
                                     codes: set[str], message: str) -> None:
    run = odd_runs[which]
    added = mutate(tmp_path, base, lambda root: swap_in(root, run))
    assert {f.code for f in added} == codes, [f.line() for f in added]
    assert any(message in f.message for f in added)
    for finding in added:
        assert finding.severity == "error"
        assert f"key {run.record.key} attempt {run.record.attempt}" in finding.run
        assert finding.run_folder == str(run.folder)


def test_seeds_of_another_round(tmp_path: Path, base: tuple[Path, set]) -> None:
    # LoadGen takes its seeds only from the mlperf.conf built into it (user.conf cannot override
    # them), so a log with v6.0's seeds comes from a v6.0 LoadGen build: we edit a real log.
    v61 = RULES.seeds

    def change(root: Path) -> None:
        log = root / OFFLINE / "TEST01/performance/run_1/mlperf_log_detail.txt"
        text = log.read_text()
        for name, value in V60_SEEDS.items():
            text = text.replace(f'"value": {getattr(v61, name)},', f'"value": {value},')
        log.write_text(text)

    added = mutate(tmp_path, base, change)
    assert [(f.code, f.severity) for f in added] == [("wrong-seeds", "error")]
    assert "the seeds of v6.0" in added[0].message and "tiny/Offline/TEST01" in added[0].run


def test_silent_case_in_a_compliance_run(tmp_path: Path, base: tuple[Path, set],
                                         odd_runs: dict[str, StoredRun]) -> None:
    added = mutate(tmp_path, base, lambda root: swap_in(root, odd_runs["invalid"], "TEST04"))
    assert {f.code for f in added} == {"invalid-run"}
    assert added[0].path == f"{OFFLINE}/TEST04/performance/run_1/mlperf_log_detail.txt"


# ---- folder file sets and tree rules ---------------------------------------------------------

def big_file(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(51 * 1024 * 1024)  # sparse: 51 MB that cost nothing


@pytest.mark.parametrize(("change", "code", "path"), [
    (lambda r: (r / OFFLINE / "TEST04/performance/run_1/extra.txt").write_text("x"),
     "file-set", f"{OFFLINE}/TEST04/performance/run_1"),
    (lambda r: (r / OFFLINE / "accuracy/mlperf_log_summary.txt").unlink(),
     "file-set", f"{OFFLINE}/accuracy"),
    (lambda r: (r / OFFLINE / "performance/run_1/ptd_out.txt").write_text("x"),
     "file-set", f"{OFFLINE}/performance/run_1"),
    (lambda r: shutil.rmtree(r / OFFLINE / "TEST04"), "missing-test", f"{OFFLINE}/TEST04"),
    (lambda r: (r / OFFLINE / "TEST01/verify_performance.txt").write_text("TEST FAIL\n"),
     "compliance-failed", f"{OFFLINE}/TEST01/verify_performance.txt"),
    (lambda r: (r / OFFLINE / "accuracy/accuracy.txt").write_text("accuracy=99%\n"),
     "no-hash", f"{OFFLINE}/accuracy/accuracy.txt"),
    (lambda r: big_file(r / OFFLINE / "accuracy/mlperf_log_accuracy.json"),
     "not-truncated", f"{OFFLINE}/accuracy/mlperf_log_accuracy.json"),
    (lambda r: (r / OFFLINE / "user.conf").write_text(""), "empty-file", f"{OFFLINE}/user.conf"),
    (lambda r: (r / OFFLINE / ".DS_Store").write_text("x"), "tree", f"{OFFLINE}/.DS_Store"),
    (lambda r: (r / OFFLINE / "TEST04/empty").mkdir(), "tree", f"{OFFLINE}/TEST04/empty"),
    (lambda r: (r / "closed/ACME/src/tiny/my notes.txt").write_text("x"), "tree",
     "closed/ACME/src/tiny/my notes.txt"),
    (lambda r: big_file(r / "closed/ACME/src/tiny/weights.bin"), "tree",
     "closed/ACME/src/tiny/weights.bin"),
    (lambda r: (r / "notes.txt").write_text("x"), "tree", "notes.txt"),
    (lambda r: os.symlink("/nonexistent", r / OFFLINE / "link"), "tree", f"{OFFLINE}/link"),
    (lambda r: (r / "closed/ACME/src").rename(r / "closed/ACME/code"), "no-src", "closed/ACME/src"),
])
def test_tree_rules_and_file_sets(tmp_path: Path, base: tuple[Path, set],
                                  change: Callable[[Path], None], code: str, path: str) -> None:
    added = mutate(tmp_path, base, change)
    assert (code, path) in keys(added), [f.line() for f in added]
    assert all(f.severity != "crash" for f in added)


def test_system_fields_are_checked(tmp_path: Path, base: tuple[Path, set]) -> None:
    def change(root: Path) -> None:
        data = json.loads((root / SYSTEM_JSON).read_text())
        del data["cooling"]
        data["framework"] = ""
        data["submitter"] = "Other"
        (root / SYSTEM_JSON).write_text(json.dumps(data))

    added = mutate(tmp_path, base, change)
    messages = " ".join(f.message for f in added)
    assert "missing cooling" in messages and "empty framework" in messages
    assert "submitter is 'Other'" in messages

