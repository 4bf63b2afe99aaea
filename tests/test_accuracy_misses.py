"""An accuracy run that missed only the model's target: its logs stay sound references for the
compliance tests, and a dry run with a stand-in model (`accuracy_misses_in_tree`) places its
result in the tree, where the checker names the accuracy; by default the result is left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.rules import load_rules
from bench.run import Check, RunRecord, RunState, Verdict
from bench.submitted import ACCURACY_MISS, missed_only_accuracy, reference, standing
from submission.assemble import TreeRequest, assemble
from submission.inputs import StoredRun, SystemInput
from testkit.submission_runs import SYSTEM, real_runs, runs_of, spec_for, tiny_benchmark

RULES = load_rules("v6.1")
MISS = Verdict(passed=False, reason="accuracy below target", checks=[
    Check(name="logs", ok=True),
    Check(name="accuracy", ok=False, detail=f"{ACCURACY_MISS}: acc 75 (needs >= 75.6954)")])
NO_SCORE = Verdict(passed=False, checks=[Check(name="accuracy", ok=False,
                                               detail="no accuracy.txt")])
SHORT_DATASET = Verdict(passed=False, checks=[
    *MISS.checks, Check(name="dataset", ok=False, detail="covered 10 samples")])


def attempt(n: int, verdict: Verdict | None, kind: str = "accuracy",
            state: RunState = RunState.FINISHED) -> RunRecord:
    spec = spec_for("Offline", kind)
    return RunRecord(spec=spec, key=spec.key, attempt=n, state=state, verdict=verdict,
                     started_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=n))


def test_only_a_missed_target_leaves_the_logs_usable() -> None:
    assert missed_only_accuracy(attempt(1, MISS))
    assert not missed_only_accuracy(attempt(1, NO_SCORE))  # no score: the logs are incomplete
    assert not missed_only_accuracy(attempt(1, SHORT_DATASET))  # another fault as well
    assert not missed_only_accuracy(attempt(1, MISS, state=RunState.FAILED))
    assert not missed_only_accuracy(attempt(1, Verdict(passed=True)))


def test_the_reference_is_the_standing_attempt_else_the_latest_miss() -> None:
    misses = [attempt(1, MISS), attempt(2, NO_SCORE), attempt(3, MISS), attempt(4, NO_SCORE)]
    assert standing(misses) is None
    found = reference(misses)
    assert found is not None and found.attempt == 3
    passing = [*misses, attempt(5, Verdict(passed=True))]
    found = reference(passing)
    assert found is not None and found.attempt == 5
    # a performance run has no accuracy to miss: only a passing attempt stands for it
    assert reference([attempt(1, MISS, kind="performance")]) is None


@pytest.mark.slow
def test_a_stand_in_models_result_enters_the_tree_only_when_asked(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    store = real_runs(tmp_path_factory.getbasetemp() / "submission-runs")
    runs = [StoredRun(r.record.model_copy(update={"verdict": MISS}), r.folder)
            if r.spec.kind.value == "accuracy" else r for r in runs_of(store)]
    systems = {"local": SystemInput("tinybox", SYSTEM)}
    placed = {}
    for misses in (False, True):
        request = TreeRequest(root=tmp_path / f"tree-{misses}", division="closed",
                              submitter="ACME", round="v6.1", accuracy_misses=misses,
                              required_tests=lambda m: [k.value for k in
                                                        RULES.model(m).compliance or ()])
        index = assemble(request, runs, systems, {"tiny": tiny_benchmark(tmp_path / "ctx")})
        placed[misses] = {r.scenario for r in index.results}
        if not misses:
            assert index.skipped and all("accuracy" in s.reason for s in index.skipped)
    assert placed[False] == set()
    assert placed[True], "no result of the stand-in model was placed"
    accuracy = next((tmp_path / "tree-True").glob("closed/ACME/results/*/*/*/accuracy"))
    assert "acc" in (accuracy / "accuracy.txt").read_text()
