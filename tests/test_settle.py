"""Settling a compliance set (bench.settle): which run a failed TEST01/TEST04 comparison repeats.

The real test runs LoadGen: a performance run measured on a slowed SUT makes its tests *faster*
than the reference, so the performance run is measured again and the collected test logs are
verified again, with no test run repeated. The store-only tests drive the decisions with a runner
that records what it is asked.
"""

from __future__ import annotations

from pathlib import Path

from bench.execute import measured_attempts
from bench.run import Check, RunKind, RunRecord, Verdict
from bench.settle import ComplianceSet, is_settled, settle
from bench.store import RunStore
from tests.support.submission_runs import TinySet, one_run, spec_for, tiny_sut


def test_a_test_faster_than_a_slow_reference_measures_performance_again(tmp_path: Path) -> None:
    store, work = RunStore(tmp_path / "store"), tmp_path / "work"
    accuracy = one_run(store, work, "SingleStream", "accuracy").record
    slow = tiny_sut("SingleStream", slowdown=1.6)
    runs = TinySet(store, work, "SingleStream", accuracy, sut=slow).first(max_reruns=3)

    perf = store.attempts(runs.performance)
    test01 = store.attempts(runs.tests[RunKind.TEST01])
    assert len(perf) >= 2 and store.standing(runs.performance) != perf[0]
    assert test01[0].verdict is not None and not test01[0].verdict.passed
    assert test01[1].reverifies == 1  # the collected logs, verified again: nothing run
    assert test01[1].references["performance"] > 1
    assert is_settled(store, runs)
    standing = store.standing(runs.performance)
    assert standing is not None
    for key in runs.tests.values():
        latest = store.latest(key)
        assert latest is not None and latest.references["performance"] == standing.attempt
        if perf.index(standing) == 1:  # settled by the second measurement: no test re-run
            assert measured_attempts(store.attempts(key)) == 1


class Recorder:
    """A runner that stores an attempt per request, with the verification text it is given."""

    def __init__(self, store: RunStore, tmp: Path, outcomes: list[tuple[str, str]]) -> None:
        self.store, self.tmp, self.outcomes, self.asked = store, tmp, outcomes, []

    def measure_again(self) -> RunRecord:
        self.asked.append("performance")
        return add(self.store, self.tmp, "performance", True, rate=2.0)

    def rerun(self, test: RunKind) -> RunRecord:
        self.asked.append(f"rerun {test.value}")
        faster, text = self.outcomes.pop(0)
        return add(self.store, self.tmp, test.value, faster == "pass", text=text)

    def reverify(self, test: RunRecord, performance: RunRecord) -> RunRecord:
        self.asked.append(f"reverify {test.spec.kind.value}")
        return add(self.store, self.tmp, test.spec.kind.value, True, reverifies=test.attempt,
                   references={"performance": performance.attempt})


SLOWER = "Reference score = 100\nTest score = 120\nTEST FAIL: Test score invalid (outside +-10%)\n"
FASTER = "Reference score = 100\nTest score = 80\nTEST FAIL: Test score invalid (outside +-10%)\n"


def add(store: RunStore, tmp: Path, kind: str, ok: bool, *, text: str = "TEST PASS\n",
        rate: float = 1.0, **changes: object) -> RunRecord:
    folder = tmp / f"files-{len(list(tmp.iterdir()))}"
    folder.mkdir()
    (folder / "verify_performance.txt").write_text(text)
    checks = [Check(name="compliance", ok=ok, detail="" if ok else "performance: TEST FAIL")]
    verdict = Verdict(passed=ok, checks=checks, metrics={"early_stopping_latency_ns": 1e6 / rate})
    references = changes.pop("references", {"performance": 1} if kind != "performance" else {})
    return store.add_attempt(spec_for("SingleStream", kind), folder, verdict=verdict,
                             exit_status=0, references=references, **changes)


def test_a_slower_test_is_run_again_within_the_bound(tmp_path: Path) -> None:
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True)
    add(store, files, "TEST01", False, text=SLOWER)
    runner = Recorder(store, files, [("fail", SLOWER), ("fail", SLOWER), ("fail", SLOWER)])
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST01: spec_for("SingleStream", "TEST01").key})
    settle(store, runs, runner, max_reruns=2)
    assert runner.asked == ["rerun TEST01", "rerun TEST01"]  # 3 measured attempts: the bound
    assert not is_settled(store, runs)


def test_a_faster_test_is_reverified_against_the_new_measurement(tmp_path: Path) -> None:
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True)
    add(store, files, "TEST01", False, text=FASTER)
    add(store, files, "TEST04", True)
    runner = Recorder(store, files, [])
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST01: spec_for("SingleStream", "TEST01").key,
                          RunKind.TEST04: spec_for("SingleStream", "TEST04").key})
    settle(store, runs, runner, max_reruns=2)
    # the better measurement stands; both tests' logs are verified again against it
    assert runner.asked == ["performance", "reverify TEST01", "reverify TEST04"]
    assert is_settled(store, runs)
