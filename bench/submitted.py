"""Which attempt of a run stands: the one references, assembly and the report all use.

A performance run may be measured again when a compliance test shows that its first measurement
was the outlier; submitters then keep the better valid measurement, so the standing attempt of a
performance run is its best passing one (highest throughput, lowest latency) that settling has
not withdrawn as a lucky measurement (a withdrawn one only when nothing else passed). Every other
run stands on its latest passing attempt. One rule, in one place, so that the attempt a compliance
test was verified against is the attempt the tree shows.

An accuracy run whose only fault is the model's score (below the round's target) still has sound
logs: compliance tests are verified against it (TEST01 compares logged samples, not the score),
and a dry run with a stand-in model may place it in the tree, where the official checker names
the accuracy as the result's error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard

from bench.run import RunKind, RunRecord, RunState, Scenario

LATENCY_SCENARIOS = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM)
ACCURACY_CHECK = "accuracy"
ACCURACY_MISS = "accuracy below target"  # how a failed accuracy check's detail starts


def passed(record: RunRecord | None) -> TypeGuard[RunRecord]:
    """Did this attempt pass: finished with a passing verdict. The one answer every layer
    (execution, settling, status, tree, report, flow states) asks."""
    return (record is not None and record.state == RunState.FINISHED
            and record.verdict is not None and record.verdict.passed)


def rate(record: RunRecord) -> float | None:
    """The performance figure that makes one attempt better than another, higher is better:
    throughput, or the negated early-stopping latency of the latency scenarios."""
    metrics = record.verdict.metrics if record.verdict else {}
    if record.spec.scenario in LATENCY_SCENARIOS:
        latency = metrics.get("early_stopping_latency_ns") or metrics.get("p99_latency_ns")
        return -latency if latency else None
    return metrics.get("completed_samples_per_second") or metrics.get("samples_per_second")


def standing(attempts: Iterable[RunRecord]) -> RunRecord | None:
    """The attempt that stands for its run, or None when none passed."""
    passing = [a for a in attempts if passed(a)]
    if not passing:
        return None
    if passing[0].spec.kind is not RunKind.PERFORMANCE:
        return max(passing, key=_order)
    kept = [a for a in passing if not a.withdrawn] or passing
    return max(kept, key=lambda a: (rate(a) or float("-inf"), _order(a)))


def missed_only_accuracy(record: RunRecord | None) -> bool:
    """Finished and judged, and nothing wrong but the model's score: every failed check is the
    accuracy target."""
    if record is None or record.state != RunState.FINISHED or record.verdict is None \
            or record.verdict.passed:
        return False
    failed = [c for c in record.verdict.checks if not c.ok]
    return bool(failed) and all(c.name == ACCURACY_CHECK and c.detail.startswith(ACCURACY_MISS)
                                for c in failed)


def reference(attempts: Iterable[RunRecord]) -> RunRecord | None:
    """The attempt whose logs stand for its run where only sound logs matter (compliance
    references; a stand-in model's tree): the standing one, or for an accuracy run none of
    whose attempts passed, its latest attempt that missed only the accuracy target."""
    attempts = list(attempts)
    found = standing(attempts)
    if found is not None or not attempts or attempts[0].spec.kind is not RunKind.ACCURACY:
        return found
    misses = [a for a in attempts if missed_only_accuracy(a)]
    return max(misses, key=_order) if misses else None


def _order(record: RunRecord) -> tuple[str, int]:
    return (record.started_at.isoformat(), record.attempt)
