"""Settling a compliance set (bench.settle): which run a failed TEST01/TEST04 comparison repeats.

The real test runs LoadGen: a performance run measured on a slowed SUT makes its tests *faster*
than the reference, so the performance run is measured again and the collected test logs are
verified again, with no test run repeated. The store-only tests drive the decisions with a runner
that records what it is asked.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.execute import ExecuteOptions, execute, measured_attempts
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import Check, RunKind, RunRecord, Verdict
from bench.settle import ComplianceSet, TargetSet, is_settled, settle
from bench.store import RunStore
from bench.submitted import passed
from bench.verdict import judge_dir
from lab.config import Inventory
from testkit.submission_runs import TinySet, one_run, spec_for, tiny_sut
from tests.support.targets import provisioned_target

RULES = load_rules("v6.1")


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

    def __init__(self, store: RunStore, tmp: Path, outcomes: list[tuple[str, str]],
                 rate: float = 2.0, same_load: bool = True) -> None:
        self.store, self.tmp, self.outcomes, self.asked = store, tmp, outcomes, []
        self.rate = rate  # what measuring performance again measures
        self.same_load = same_load  # whether a new performance attempt kept the old's load

    def ran_at(self, test: RunRecord, performance: RunRecord) -> bool:
        return self.same_load

    def measure_again(self) -> RunRecord:
        self.asked.append("performance")
        return add(self.store, self.tmp, "performance", True, rate=self.rate)

    def rerun(self, test: RunKind) -> RunRecord:
        self.asked.append(f"rerun {test.value}")
        faster, text = self.outcomes.pop(0)
        standing = self.store.standing(spec_for("SingleStream", "performance").key)
        assert standing is not None
        return add(self.store, self.tmp, test.value, faster == "pass", text=text,
                   references={"performance": standing.attempt})

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
    runner = Recorder(store, files, [("pass", "TEST PASS\n")])
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST01: spec_for("SingleStream", "TEST01").key})
    settle(store, runs, runner, max_reruns=0)
    assert runner.asked == [] and not is_settled(store, runs)  # no re-run allowed: it stands
    settle(store, runs, runner, max_reruns=2)
    assert runner.asked == ["rerun TEST01"]  # slower once: the test is run again
    assert is_settled(store, runs)
    assert not store.attempts(runs.performance)[0].withdrawn


def test_a_reference_slower_twice_measured_once_is_measured_again(tmp_path: Path) -> None:
    """Two tests' measurements slower than a single reference: performance is measured again;
    slower again, the first measurement (now the best of two) is withdrawn and the tests' logs
    verified against the second, with no test run a third time."""
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True)
    add(store, files, "TEST01", False, text=SLOWER)
    runner = Recorder(store, files, [("fail", SLOWER)], rate=0.95)
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST01: spec_for("SingleStream", "TEST01").key})
    settle(store, runs, runner, max_reruns=2)
    assert runner.asked == ["rerun TEST01", "performance", "reverify TEST01"]
    perf = store.attempts(runs.performance)
    assert "slower than it twice" in perf[0].withdrawn and not perf[1].withdrawn
    assert is_settled(store, runs)


def lucky_set(tmp_path: Path) -> tuple[RunStore, Path, ComplianceSet]:
    """Performance measured twice, the second luckily fast (it stands); TEST01 slower."""
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True, rate=1.0)
    add(store, files, "performance", True, rate=1.5)
    add(store, files, "TEST01", False, text=SLOWER, references={"performance": 2})
    return store, files, ComplianceSet(spec_for("SingleStream", "performance").key,
                                       {RunKind.TEST01: spec_for("SingleStream", "TEST01").key})


def test_a_lucky_reference_slower_twice_is_withdrawn(tmp_path: Path) -> None:
    """The best of several measurements, and the test slower than it twice: re-running the test
    could never pass, so the reference is withdrawn and the test's logs verified against the
    next best measurement."""
    store, files, runs = lucky_set(tmp_path)
    runner = Recorder(store, files, [("fail", SLOWER)])
    settle(store, runs, runner, max_reruns=2)
    assert runner.asked == ["rerun TEST01", "reverify TEST01"]
    perf = store.attempts(runs.performance)
    assert "slower than it twice" in perf[1].withdrawn and not perf[0].withdrawn
    standing = store.standing(runs.performance)
    assert standing is not None and standing.attempt == 1  # the best not withdrawn
    assert is_settled(store, runs)
    assert store.path(runs.performance, 2).is_dir()  # withdrawn, its logs kept
    from submission.inputs import StoredRun
    from submission.sections import audits
    table = "\n".join(audits([StoredRun(r, store.path(r.key, r.attempt)) for key in
                              (runs.performance, *runs.tests.values())
                              for r in store.attempts(key)]))
    assert "performance | attempt 2 withdrawn: TEST01 measured slower than it twice" in table


def test_a_re_verification_is_not_a_second_measurement(tmp_path: Path) -> None:
    store, files, runs = lucky_set(tmp_path)
    add(store, files, "TEST01", False, text=SLOWER, reverifies=1,
        references={"performance": 2})  # the same logs, judged again: one measurement
    runner = Recorder(store, files, [("pass", "TEST PASS\n")])
    settle(store, runs, runner, max_reruns=2)
    assert runner.asked == ["rerun TEST01"]
    assert not any(a.withdrawn for a in store.attempts(runs.performance))


def test_a_withdrawn_reference_stands_only_when_nothing_else_passed(tmp_path: Path) -> None:
    from bench.submitted import standing

    store, _, runs = lucky_set(tmp_path)
    fast = store.update(runs.performance, 2, withdrawn="lucky")
    slow = store.attempts(runs.performance)[0]
    assert standing([slow, fast]) == slow
    assert standing([fast]) == fast


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


@pytest.mark.lab
def test_on_a_lab_host_a_slow_reference_is_measured_again_not_the_tests(
        lab_inventory: Inventory, tmp_path: Path) -> None:
    """digits on h2: the performance run's stored logs say 90 % less throughput than it did (a
    disturbed reference; with 70 % less, TEST01 beside other tests' runs on h2's core once ran
    no faster than that); TEST01 then ran faster, so settling measures performance again in a
    container and verifies the test's collected logs against it. Whether the set then agrees
    depends on this machine's load: the decisions are asserted, not the outcome."""
    target = provisioned_target(lab_inventory, "h2")
    campaign = Campaign.model_validate({"hosts": [{"host": "h2", "benchmarks": [
        {"benchmark": "digits", "scenarios": ["Offline"]}]}]})
    plan = make_plan(campaign, {"digits": target.manifest}, RULES).with_images(
        {("h2", "digits"): target.image_id}, "6.0.17")
    runs = [r for r in plan.runs if r.spec.kind is not RunKind.POWER]
    store, options = RunStore(tmp_path / "store"), ExecuteOptions(max_reruns=2)
    measured = execute(target, runs[0], RunStore(tmp_path / "first"), RULES)
    slowed(RunStore(tmp_path / "first").path(measured.key, measured.attempt), tmp_path / "slow",
           factor=0.1)
    store.add_attempt(measured.spec, tmp_path / "slow", verdict=judge_dir(
        measured.spec, tmp_path / "slow", RULES), exit_status=0)
    accuracy = execute(target, runs[1], store, RULES)
    sets = TargetSet(target, runs, store, RULES, options)
    for test in runs[2:]:
        execute(target, test, store, RULES, references=sets.references(), options=options)
        settle(store, sets.runs(), sets, max_reruns=2)

    perf = store.attempts(runs[0].spec.key)
    assert len(perf) >= 2 and perf[1].reverifies is None  # measured again, in a container
    test01 = store.attempts(runs[2].spec.key)
    assert test01[0].verdict is not None and not test01[0].verdict.passed
    assert test01[1].reverifies == 1 and test01[1].references["performance"] >= 2
    assert accuracy.verdict is not None and accuracy.verdict.passed
    if is_settled(store, sets.runs()):
        standing = store.standing(runs[0].spec.key)
        assert standing is not None and standing.attempt >= 2


def slowed(attempt: Path, out: Path, factor: float = 0.3) -> None:
    """A copy of an Offline attempt's files whose logs report factor x its throughput (70 %
    less by default)."""
    shutil.copytree(attempt, out, ignore=shutil.ignore_patterns("run.json"))
    for log in out.rglob("mlperf_log_*.txt"):
        text = log.read_text()
        text = re.sub(r'("key": "result_samples_per_second", "value": )([0-9.e+]+)',
                      lambda m: f"{m.group(1)}{float(m.group(2)) * factor}", text)
        text = re.sub(r"^(Samples per second: )([0-9.e+]+)$",
                      lambda m: f"{m.group(1)}{float(m.group(2)) * factor}", text, flags=re.M)
        log.write_text(text)


def test_a_real_lucky_reference_is_withdrawn_and_the_tests_logs_verified_again(
        tmp_path: Path) -> None:
    """Real LoadGen runs of the tiny SUT: performance measured once, and a second attempt whose
    logs claim three times the throughput (a lucky measurement: it stands, being the best).
    TEST01 measures slower than it, and again when run again (TEST04 fails only faster): the
    lucky attempt is withdrawn with its logs kept, and the tests' collected logs are verified
    against the genuine measurement, not run a third time."""
    store, work = RunStore(tmp_path / "store"), tmp_path / "work"
    accuracy = one_run(store, work, "Offline", "accuracy").record
    tiny = TinySet(store, work, "Offline", accuracy)
    first = one_run(store, work, "Offline", "performance")
    slowed(first.folder, tmp_path / "lucky", factor=3.0)
    store.add_attempt(first.spec, tmp_path / "lucky", verdict=judge_dir(
        first.spec, tmp_path / "lucky", RULES), exit_status=0)
    standing = store.standing(first.record.key)
    assert standing is not None and standing.attempt == 2  # the lucky one stands
    tests = {kind: one_run(store, work, "Offline", kind.value, refs=tiny.refs()).record
             for kind in (RunKind.TEST01, RunKind.TEST04)}
    assert not passed(tests[RunKind.TEST01])  # slower than the lucky reference
    runs = ComplianceSet(first.record.key, {k: t.key for k, t in tests.items()})
    settle(store, runs, tiny, max_reruns=2)

    perf = store.attempts(first.record.key)
    assert "slower than it twice" in perf[1].withdrawn and not perf[0].withdrawn
    assert len(perf) == 2 and store.path(first.record.key, 2).is_dir()  # withdrawn, kept
    standing = store.standing(first.record.key)
    assert standing is not None and standing.attempt == 1
    test01 = store.attempts(runs.tests[RunKind.TEST01])
    assert [a.reverifies for a in test01] == [None, None, 2]  # measured twice, then re-verified
    assert measured_attempts(test01) == 2
    assert test01[2].references["performance"] == standing.attempt
    test04 = store.attempts(runs.tests[RunKind.TEST04])
    assert test04[-1].references["performance"] == standing.attempt  # re-verified too
    assert measured_attempts(test04) == 1


def test_a_test_still_faster_when_performance_is_spent_is_run_again(tmp_path: Path) -> None:
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True)
    add(store, files, "performance", True)  # measured again already: max_reruns 1 is spent
    add(store, files, "TEST01", False, text=FASTER, references={"performance": 2})
    runner = Recorder(store, files, [("pass", "TEST PASS\n")])
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST01: spec_for("SingleStream", "TEST01").key})
    settle(store, runs, runner, max_reruns=1)
    # the test was the lucky measurement: it is run again, within its own bound
    assert runner.asked[0] == "rerun TEST01"
    assert is_settled(store, runs)


def test_a_test_run_at_an_earlier_references_load_is_run_again_not_reverified(
        tmp_path: Path) -> None:
    """The reference was measured again at another load (a re-run at a lower target): a test
    judged against the earlier attempt ran at that attempt's load, so it is run again at the
    standing attempt's; the same test within no bound is verified again as it is."""
    store, files = RunStore(tmp_path / "store"), tmp_path / "files"
    files.mkdir()
    add(store, files, "performance", True, rate=1.0)
    add(store, files, "TEST04", True)  # judged against attempt 1
    add(store, files, "performance", True, rate=1.5)  # attempt 2 stands, at another load
    runs = ComplianceSet(spec_for("SingleStream", "performance").key,
                         {RunKind.TEST04: spec_for("SingleStream", "TEST04").key})
    moved = Recorder(store, files, [("pass", "TEST PASS\n")], same_load=False)
    settle(store, runs, moved, max_reruns=2)
    assert moved.asked == ["rerun TEST04"]
    assert is_settled(store, runs)

    store2, files2 = RunStore(tmp_path / "store2"), tmp_path / "files2"
    files2.mkdir()
    add(store2, files2, "performance", True, rate=1.0)
    add(store2, files2, "TEST04", True)
    add(store2, files2, "performance", True, rate=1.5)
    spent = Recorder(store2, files2, [], same_load=False)
    settle(store2, runs, spent, max_reruns=0)  # no re-run left: its logs are judged again
    assert spent.asked == ["reverify TEST04"]


def test_a_test_invalid_at_its_references_load_is_a_timing_failure() -> None:
    from datetime import UTC, datetime

    from bench.run import RunState
    from bench.settle import measured_faster, missed_latency, outran, timing_only

    def verdict(*checks: Check) -> Verdict:
        return Verdict(passed=False, checks=list(checks))

    compliance = Check(name="compliance", ok=False, detail="performance: TEST FAIL")
    slow = Check(name="valid", ok=False,
                 detail="LoadGen judged the run INVALID (latency constraint not met)")
    fast = Check(name="valid", ok=False,
                 detail="LoadGen judged the run INVALID (min duration not met)")
    seeds = Check(name="seeds", ok=False, detail="the seeds are those of no known round")
    accuracy = Check(name="compliance", ok=False,
                     detail="accuracy: responses differ from the accuracy run's")
    spec = spec_for("Offline", "TEST04")

    def record(*checks: Check) -> RunRecord:
        return RunRecord(spec=spec, key=spec.key, attempt=1, state=RunState.FINISHED,
                         started_at=datetime.now(UTC), verdict=verdict(*checks))

    assert timing_only(record(compliance, slow)) and missed_latency(record(compliance, slow))
    assert timing_only(record(compliance, fast)) and outran(record(compliance, fast))
    assert not timing_only(record(compliance, seeds))  # the SUT's fault stands
    assert not timing_only(record(accuracy))
    assert not timing_only(record(slow))  # no comparison failed: nothing to settle
    store = RunStore(Path("/nonexistent-store"))
    assert measured_faster(store, record(compliance, fast)) is True
    assert measured_faster(store, record(compliance, slow)) is False
    assert measured_faster(store, record(compliance)) is None
