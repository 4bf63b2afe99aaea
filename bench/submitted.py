"""Which attempt of a run stands: the one references, assembly and the report all use.

A performance run may be measured again when a compliance test shows that its first measurement
was the outlier; submitters then keep the better valid measurement, so the standing attempt of a
performance run is its best passing one (highest throughput, lowest latency). Every other run
stands on its latest passing attempt. One rule, in one place, so that the attempt a compliance
test was verified against is the attempt the tree shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard

from bench.run import RunKind, RunRecord, RunState, Scenario

LATENCY_SCENARIOS = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM)


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
    return max(passing, key=lambda a: (rate(a) or float("-inf"), _order(a)))


def _order(record: RunRecord) -> tuple[str, int]:
    return (record.started_at.isoformat(), record.attempt)
