"""Which finished attempts execute runs again: INVALID runs with proposed settings and lost
attempts; never a wrong answer, and never a compliance test's timing comparison, which
bench.settle resolves (tests/test_settle.py), and which settling classifies here."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.execute import ExecuteOptions, _may_rerun
from bench.run import Check, Mode, RunKind, RunSpec, Scenario, Verdict
from bench.settle import timing_only
from bench.store import RunStore

SPEC = RunSpec(host="h", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
               kind=RunKind.TEST01, mode=Mode.SHORT, round="v6.1")


def attempt(store: RunStore, state: str, verdict: Verdict | None = None,  # type: ignore[no-untyped-def]
            spec: RunSpec = SPEC):
    record = store.start_attempt(spec)
    return store.update(record.key, record.attempt, state=state, verdict=verdict,
                        finished_at=datetime.now(UTC))


def failed(detail: str, name: str = "compliance") -> Verdict:
    return Verdict(passed=False, checks=[Check(name="valid", ok=True),
                                         Check(name=name, ok=False, detail=detail)])


@pytest.mark.parametrize(("verdict", "rerun"), [
    (failed("performance: TEST FAIL: Test score invalid (outside +-10%)"), False),
    (failed("accuracy: responses differ from the accuracy run's"), False),
    (failed("performance: TEST FAIL; accuracy (non-deterministic check): 70.0 < 76.3"), False),
    (failed("LoadGen judged the run INVALID", name="valid"), False),
    # a test runs at its reference's load, never at settings its own verdict proposes
    (Verdict(passed=False, rerun_settings={"*.Offline.target_qps": 900}), False),
])
def test_what_is_run_again(verdict: Verdict, rerun: bool, tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    record = attempt(store, "finished", verdict)
    assert _may_rerun(store, record, ExecuteOptions(max_reruns=1)) is rerun
    second = attempt(store, "finished", verdict)
    assert not _may_rerun(store, second, ExecuteOptions(max_reruns=1))  # the bound holds


def test_an_invalid_performance_run_is_run_again_at_its_verdicts_settings(
        tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = SPEC.model_copy(update={"kind": RunKind.PERFORMANCE})
    proposal = Verdict(passed=False, rerun_settings={"*.Offline.target_qps": 900})
    assert _may_rerun(store, attempt(store, "finished", proposal, spec),
                      ExecuteOptions(max_reruns=1))
    assert not _may_rerun(store, attempt(store, "finished", proposal, spec),
                          ExecuteOptions(max_reruns=1))  # the bound holds


@pytest.mark.parametrize(("verdict", "settles"), [
    (failed("performance: TEST FAIL: Test score invalid (outside +-10%)"), True),
    (failed("accuracy: responses differ from the accuracy run's"), False),
    (failed("performance: TEST FAIL; accuracy (non-deterministic check): 70.0 < 76.3"), False),
    (failed("LoadGen judged the run INVALID", name="valid"), False),
])
def test_what_settling_may_repeat(verdict: Verdict, settles: bool, tmp_path: Path) -> None:
    assert timing_only(attempt(RunStore(tmp_path), "finished", verdict)) is settles


def test_lost_attempts_do_not_use_up_reruns_but_are_bounded(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    options = ExecuteOptions(max_reruns=0)
    assert _may_rerun(store, attempt(store, "lost"), options)
    attempt(store, "lost")
    attempt(store, "lost")
    assert not _may_rerun(store, attempt(store, "lost"), options)
