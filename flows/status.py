"""Where a campaign stands: each planned run's state (bench.run.RunState), and the ETA.

Runs are matched to the run store by what they are (their `RunId`: host, benchmark, scenario,
kind), among the records of the plan's round and mode, so the matrix is right before images are
bound and across re-runs with new settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bench.plan import Plan, PlannedRun
from bench.run import RunId, RunRecord, RunSpec, RunState
from bench.store import RunStore
from bench.submitted import passed, standing

UNJUDGED_END = (RunState.FAILED, RunState.LOST)


@dataclass(frozen=True)
class RunStatus:
    """A planned run and the attempt that shows where it stands (None: pending)."""

    planned: PlannedRun
    record: RunRecord | None

    @property
    def state(self) -> RunState:
        return self.record.state if self.record is not None else RunState.PENDING

    @property
    def passed(self) -> bool:
        return passed(self.record)

    @property
    def ended(self) -> bool:
        """Finished or failed for good (a cancelled run runs again)."""
        return self.state == RunState.FINISHED or self.state in UNJUDGED_END

    @property
    def word(self) -> str:
        """As `subrun status` shows it: done, failed, running, cancelled or pending."""
        if self.passed:
            return "done"
        return "failed" if self.ended else self.state.value

    @property
    def detail(self) -> str:
        if self.record is None:
            return ""
        if not self.passed and self.state != RunState.RUNNING:
            verdict = self.record.verdict
            return self.record.error or (verdict.reason if verdict else "")
        return f"attempt {self.record.attempt}"


def campaign_status(plan: Plan, store: RunStore) -> list[RunStatus]:
    """The state of every planned run: an attempt in progress, else the attempt that stands
    (bench.submitted), else the latest one."""
    grouped: dict[tuple[RunId, str, str], list[RunRecord]] = {}
    for record in store.runs():
        grouped.setdefault(_of_terms(record.spec), []).append(record)
    shown: dict[tuple[RunId, str, str], RunRecord] = {}
    for key, records in grouped.items():
        latest = max(records, key=lambda r: (r.started_at, r.attempt))
        shown[key] = latest if latest.state == RunState.RUNNING else standing(records) or latest
    return [RunStatus(run, shown.get(_of_terms(run.spec))) for run in plan.runs]


def _of_terms(spec: RunSpec) -> tuple[RunId, str, str]:
    """The run, under the round and mode it ran in: a short run never stands for a
    submission one."""
    return (spec.run, spec.round, spec.mode.value)


def pace(statuses: list[RunStatus]) -> float:
    """How long finished runs really took against their estimates (1.0 before any finished)."""
    measured = estimated = 0.0
    for status in statuses:
        record = status.record
        if status.ended and record and record.finished_at:
            measured += (record.finished_at - record.started_at).total_seconds()
            estimated += status.planned.estimate_s
    return measured / estimated if estimated and measured else 1.0


def eta_s(plan: Plan, statuses: list[RunStatus],
          waits_s: Mapping[str, float] | None = None) -> float:
    """Estimated wall time left: the busiest host's pending and running runs, with estimates
    scaled by the pace of the runs that finished, plus what other campaigns still have to do
    on a host they hold now (waits_s, per host)."""
    left: dict[str, float] = {}
    for status in statuses:
        if not status.ended:
            host = status.planned.spec.host
            left[host] = left.get(host, 0.0) + status.planned.estimate_s
    waits = waits_s or {}
    return max((s * pace(statuses) + waits.get(h, 0.0) for h, s in left.items()), default=0.0)


def work_left_s(plan: Plan, planned: PlannedRun, store: RunStore) -> float:
    """The work a campaign has left on a run's host from that run on: its estimate and those
    of the host's later runs that have not passed yet (a resumed campaign skips those)."""
    runs = plan.for_host(planned.spec.host)
    start = next(i for i, r in enumerate(runs) if r.label == planned.label)
    return planned.estimate_s + sum(r.estimate_s for r in runs[start + 1:]
                                    if not passed(store.latest(r.spec.key)))
