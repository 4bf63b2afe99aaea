"""Settle a compliance set: the performance run and its TEST01/TEST04 agree, as submitters do.

A TEST01/TEST04 performance comparison fails when the two measurements differ by more than the
round allows. A disturbance only ever makes a run slower, so the direction says which run was
disturbed:

- the test ran *faster* than its reference: the performance run (the submitted score) was the
  outlier. It is measured again, its better passing attempt stands (bench.submitted), and the test
  logs already collected are verified again against it, as new attempts that run nothing;
- the test ran *slower*: the test was disturbed, and it is run again; so is a test still faster
  once the performance run has used up its re-runs (the test was the lucky one);
- unless the tests measured slower than the reference twice (two measurements: a
  re-verification is its source's): then the reference is the doubtful one, and re-running the
  test may never pass. A reference measured only once is measured again (within its bound); one
  that is the best of several passing measurements is withdrawn (keeping the best of several
  keeps the luckiest; its record says why, its logs stay, the report lists it), and the tests'
  collected logs are verified again against the best measurement not withdrawn.

Every test runs at the load of the performance attempt it is compared with
(`bench.execute.compared_spec`). When the standing attempt changes, a test judged against an
earlier one is verified again from its logs if it ran at the new attempt's load, else run again
at it (within its bound; past it, verified again as it is). A test that is INVALID at its
reference's load is a timing failure too: on its latency bound it ran slower, out of work before
its minimum duration it ran faster.

Each run stays within the campaign's re-run bound; the +-10 % bound itself never moves. The
decisions read only the run store, so a campaign started again continues where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from bench.compliance import test_was_faster
from bench.execute import ExecuteOptions, compared_spec, execute, may_measure_again, reverify
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import RunKind, RunRecord, RunState
from bench.settings import load_of
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunTarget

log = logging.getLogger("subrun.runs")


class SetRunner(Protocol):
    """What settling may ask of the runs of one set."""

    def measure_again(self) -> RunRecord:
        """A new attempt of the performance run; returns it."""
        ...

    def rerun(self, test: RunKind) -> RunRecord:
        """A new attempt of a compliance test against the standing references; returns it."""
        ...

    def reverify(self, test: RunRecord, performance: RunRecord) -> RunRecord:
        """A new attempt of the test from its collected logs, verified against performance."""
        ...

    def ran_at(self, test: RunRecord, performance: RunRecord) -> bool:
        """Whether the test attempt ran at the load it would be given against performance."""
        ...


@dataclass(frozen=True)
class ComplianceSet:
    """The runs of one host x benchmark x scenario that must agree: keys in the run store."""

    performance: str
    tests: Mapping[RunKind, str]  # the compliance tests of the set that have run so far


# LoadGen's unmet conditions that only say the measurement was disturbed or ran at another speed
TIMING_UNMET = ("latency constraint", "early stopping", "min duration")


def timing_only(record: RunRecord) -> bool:
    """A finished test whose failures are all timing: its performance comparison, or LoadGen's
    validity at its reference's load (the latency bound, early stopping, or running out of work
    before the minimum duration). Settling can help. An accuracy mismatch or any other failure
    is the SUT's, and stands."""
    verdict = record.verdict
    if record.state != RunState.FINISHED or verdict is None or verdict.passed:
        return False
    failing = [c for c in verdict.checks if not c.ok]
    return bool(failing) and any(c.name == "compliance" for c in failing) \
        and all(_is_timing(c.name, c.detail) for c in failing)


def _is_timing(name: str, detail: str) -> bool:
    if name == "compliance":
        return detail.startswith("performance:") and "accuracy" not in detail
    if name == "valid":
        unmet = detail.partition("(")[2].removesuffix(" not met)")
        return bool(unmet) and all(u in TIMING_UNMET for u in unmet.split(", "))
    return name == "early_stopping"


def outran(record: RunRecord) -> bool:
    """INVALID because it ran out of work before its minimum duration: at its reference's
    target, the test ran faster than the reference."""
    return _unmet(record, "min duration")


def missed_latency(record: RunRecord) -> bool:
    """INVALID on its latency bound at its reference's load: the test ran slower."""
    return _unmet(record, "latency constraint") or _unmet(record, "early stopping")


def _unmet(record: RunRecord, condition: str) -> bool:
    verdict = record.verdict
    return verdict is not None and any(
        c.name == "valid" and not c.ok and condition in c.detail for c in verdict.checks)


def measured_faster(store: RunStore, test: RunRecord) -> bool | None:
    """Whether the test measured faster than its reference: the verification's two scores,
    else LoadGen's reason for judging the test INVALID; None when nothing says."""
    found = test_was_faster(test.spec.kind, test.spec.scenario, _verify_text(store, test))
    if found is not None:
        return found
    if outran(test):
        return True
    return False if missed_latency(test) else None


def settle(store: RunStore, runs: ComplianceSet, runner: SetRunner, max_reruns: int) -> None:
    """Repeat the runs of the set the failures point at, until every test passes or the
    re-run bound of the run to repeat is spent."""
    keys = [runs.performance, *runs.tests.values()]
    made = -1
    while (count := _progress(store, keys)) > made:
        made = count  # every round adds or withdraws an attempt, or settling ends
        performance = store.standing(runs.performance)
        if performance is None:
            return  # no reference: the tests' verdicts say so, nothing to settle against
        stale = [store.latest(k) for k in runs.tests.values()]
        for record in stale:
            if (record is not None and record.state == RunState.FINISHED
                    and record.references.get(RunKind.PERFORMANCE.value, performance.attempt)
                    != performance.attempt):  # judged against an earlier reference
                if runner.ran_at(record, performance) \
                        or not may_measure_again(store.attempts(record.key), max_reruns):
                    runner.reverify(record, performance)
                else:  # it ran at the old reference's load: run it at the new one's
                    log.info("%s ran at the load of an earlier performance attempt: running it "
                             "again at attempt %d's", record.spec.label, performance.attempt)
                    runner.rerun(record.spec.kind)
        failing = [r for r in (store.latest(k) for k in runs.tests.values())
                   if r is not None and timing_only(r)]
        if not failing:
            return
        test = failing[0]
        faster = measured_faster(store, test)
        doubted = faster is False and slower_twice(store, runs, performance)
        if faster and may_measure_again(store.attempts(runs.performance), max_reruns):
            log.info("%s ran faster than performance attempt %d: measuring performance again",
                     test.spec.label, performance.attempt)
            runner.measure_again()
        elif doubted and others(store, runs, performance):
            why = (f"{test.spec.kind.value} measured slower than it twice; it was the best of "
                   "several measurements")
            log.info("%s: performance attempt %d withdrawn (%s)", test.spec.label,
                     performance.attempt, why)
            store.update(runs.performance, performance.attempt, withdrawn=why)
        elif doubted and may_measure_again(store.attempts(runs.performance), max_reruns):
            log.info("%s ran slower than performance attempt %d twice: measuring performance "
                     "again", test.spec.label, performance.attempt)
            runner.measure_again()
        elif faster is not None and may_measure_again(store.attempts(test.key), max_reruns):
            # slower: the test was disturbed; still faster once performance may not be measured
            # again: the test's own measurement was the outlier
            log.info("%s ran %s than performance attempt %d: running it again", test.spec.label,
                     "faster" if faster else "slower", performance.attempt)
            runner.rerun(test.spec.kind)
        else:
            return


def _progress(store: RunStore, keys: Sequence[str]) -> int:
    """Attempts made plus attempts withdrawn: every round of settling raises it."""
    return sum(len(a) + sum(1 for r in a if r.withdrawn)
               for a in (store.attempts(k) for k in keys))


def others(store: RunStore, runs: ComplianceSet, performance: RunRecord) -> bool:
    """Passing performance measurements besides the standing one, none withdrawn."""
    return any(passed(a) and not a.withdrawn and a.attempt != performance.attempt
               for a in store.attempts(runs.performance))


def slower_twice(store: RunStore, runs: ComplianceSet, performance: RunRecord) -> bool:
    """Compliance tests measured slower than the standing reference twice (two measurements: a
    re-verification is its source's)."""
    slower = set()
    for key in runs.tests.values():
        attempts = {a.attempt: a for a in store.attempts(key)}
        for a in attempts.values():
            if (a.references.get(RunKind.PERFORMANCE.value) == performance.attempt
                    and timing_only(a) and measured_faster(store, a) is False):
                slower.add((key, _source(a, attempts)))
    return len(slower) >= 2


def _source(record: RunRecord, attempts: Mapping[int, RunRecord]) -> int:
    """The attempt that measured the logs a record judges (following re-verifications, each of
    an earlier attempt)."""
    while record.reverifies is not None and record.reverifies < record.attempt \
            and record.reverifies in attempts:
        record = attempts[record.reverifies]
    return record.attempt


def _verify_text(store: RunStore, record: RunRecord) -> str:
    folder = store.path(record.key, record.attempt)
    names = sorted((n for n in record.files if n.endswith("verify_performance.txt")),
                   key=lambda n: n.count("/"))
    return (folder / names[0]).read_text(errors="replace") if names else ""


def is_settled(store: RunStore, runs: ComplianceSet) -> bool:
    """Every test of the set passed against the standing performance attempt."""
    performance = store.standing(runs.performance)
    latest = [store.latest(k) for k in runs.tests.values()]
    return performance is not None and all(
        r is not None and passed(r)
        and r.references.get(RunKind.PERFORMANCE.value, performance.attempt)
        == performance.attempt for r in latest)


class TargetSet:
    """The runs of one host x benchmark x scenario on their target, for settle: a new
    measurement or test run goes through bench.execute (detached, reattached, collected, judged
    within the bound), a re-verification through the store alone."""

    def __init__(self, target: RunTarget, planned: Sequence[PlannedRun], store: RunStore,
                 rules: RoundRules, options: ExecuteOptions) -> None:
        self.target, self.store, self.rules = target, store, rules
        self.options = replace(options, again=True)
        self.planned = {p.spec.kind: p for p in planned}

    def runs(self) -> ComplianceSet:
        """The set: the performance run and the compliance tests that have run so far."""
        return ComplianceSet(
            performance=self.planned[RunKind.PERFORMANCE].spec.key,
            tests={k: p.spec.key for k, p in self.planned.items()
                   if k.is_compliance and self.store.latest(p.spec.key) is not None})

    def references(self) -> dict[RunKind, RunRecord]:
        """The standing performance and accuracy attempts a test is verified against."""
        found = {k: self.store.reference(self.planned[k].spec.key)
                 for k in (RunKind.PERFORMANCE, RunKind.ACCURACY) if k in self.planned}
        return {k: r for k, r in found.items() if r is not None}

    def measure_again(self) -> RunRecord:
        return execute(self.target, self.planned[RunKind.PERFORMANCE], self.store, self.rules,
                       options=self.options)

    def rerun(self, test: RunKind) -> RunRecord:
        return execute(self.target, self.planned[test], self.store, self.rules,
                       references=self.references(), options=self.options)

    def reverify(self, test: RunRecord, performance: RunRecord) -> RunRecord:
        references = {**self.references(), RunKind.PERFORMANCE: performance}
        return reverify(self.store, test, self.rules, references)

    def ran_at(self, test: RunRecord, performance: RunRecord) -> bool:
        planned = self.planned[test.spec.kind]
        wanted = compared_spec(planned, {RunKind.PERFORMANCE: performance})
        scenario = test.spec.scenario
        return load_of(wanted.settings, scenario) == load_of(test.spec.settings, scenario)
