"""The plan a campaign ran with, kept beside its store, and how its estimates compared.

When a campaign's images are bound, the plan's estimates (per run: label, key, host, seconds,
basis, note) are written to `plan.json` (`CampaignPaths.plan`). After the runs, each planned
run's actual wall time is read from the store: every attempt's recorded span plus the settle
wait before it, so a re-run counts against the estimate as it counted on the clock. Per host, the
wall time is the span from the first attempt's settle to the last attempt's end among the
attempts made since the plan was written; runs found finished from an earlier start of the
campaign are shown but left out of the host's totals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from bench.measured import Basis
from bench.plan import Plan
from bench.run import RunRecord
from bench.store import RunStore
from lab.errors import ConfigError


class PlannedEstimate(BaseModel):
    """One run's estimate as the campaign planned it."""

    label: str
    key: str  # the run's key in the store
    host: str
    estimate_s: float
    basis: Basis
    note: str = ""


class PlanRecord(BaseModel):
    """The estimates of one start of a campaign."""

    campaign: str
    written_at: datetime
    runs: list[PlannedEstimate]


def write_plan(plan: Plan, path: Path) -> PlanRecord:
    """Keep the plan's estimates (atomically: a report never reads half a plan)."""
    record = PlanRecord(campaign=plan.campaign.name, written_at=datetime.now(UTC), runs=[
        PlannedEstimate(label=r.label, key=r.spec.key, host=r.spec.host,
                        estimate_s=round(r.estimate_s, 3), basis=r.basis, note=r.assumption)
        for r in plan.runs])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(record.model_dump_json(indent=2))
    os.replace(tmp, path)
    return record


def read_plan(path: Path) -> PlanRecord | None:
    """The kept plan, or None when the campaign never got as far as binding its images."""
    if not path.is_file():
        return None
    try:
        return PlanRecord.model_validate_json(path.read_bytes())
    except (ValidationError, ValueError) as e:
        raise ConfigError(f"{path}: the campaign's kept plan cannot be read ({e}). Delete it; "
                          "the next start of the campaign writes it again.") from e


@dataclass(frozen=True)
class RunActual:
    """One planned run: its estimate beside the wall time its attempts took."""

    planned: PlannedEstimate
    actual_s: float | None  # None: no attempt ended
    attempts: int
    reused: bool  # every attempt predates this plan: found finished, not run again

    @property
    def diff_pct(self) -> float | None:
        return _pct(self.planned.estimate_s, self.actual_s)


@dataclass(frozen=True)
class HostActual:
    """One host's estimated and actual wall time over the runs it made under this plan."""

    host: str
    estimate_s: float
    actual_s: float | None
    runs: int  # runs with attempts under this plan
    reused: int  # runs found finished from an earlier start, left out

    @property
    def diff_pct(self) -> float | None:
        return _pct(self.estimate_s, self.actual_s)

    def line(self) -> str:
        """One line for the CLI's end summary."""
        if self.actual_s is None:
            return f"{self.host}: estimated {_s(self.estimate_s)}, nothing ran"
        reused = f"; {self.reused} run(s) found finished, left out" if self.reused else ""
        return (f"{self.host}: estimated {_s(self.estimate_s)}, actual {_s(self.actual_s)} "
                f"({self.diff_pct:+.0f} %) over {self.runs} run(s){reused}")


@dataclass(frozen=True)
class Comparison:
    """Estimate vs actual for every planned run and every host."""

    plan: PlanRecord
    runs: list[RunActual]
    hosts: list[HostActual]


def compare(plan: PlanRecord, store: RunStore) -> Comparison:
    """Each planned run's estimate against its attempts in the store, and per-host totals."""
    runs: list[RunActual] = []
    fresh: dict[str, list[RunRecord]] = {}
    for planned in plan.runs:
        attempts = store.attempts(planned.key)
        ended = [a for a in attempts if a.finished_at is not None]
        actual = sum(_span_s(a) for a in ended) if ended else None
        mine = [a for a in attempts if a.started_at >= plan.written_at]
        runs.append(RunActual(planned, actual, len(attempts), bool(attempts) and not mine))
        if mine:
            fresh.setdefault(planned.key, mine)
    hosts = []
    for host in dict.fromkeys(p.host for p in plan.runs):
        made = [r for r in runs if r.planned.host == host and r.planned.key in fresh]
        records = [a for r in made for a in fresh[r.planned.key] if a.finished_at is not None]
        span = None
        if records:
            begin = min(a.started_at.timestamp() - a.settle_s for a in records)
            span = max(a.finished_at.timestamp() for a in records if a.finished_at) - begin
        hosts.append(HostActual(host, sum(r.planned.estimate_s for r in made), span, len(made),
                                sum(r.reused for r in runs if r.planned.host == host)))
    return Comparison(plan, runs, hosts)


def _span_s(record: RunRecord) -> float:
    assert record.finished_at is not None
    return (record.finished_at - record.started_at).total_seconds() + record.settle_s


def _pct(estimate_s: float, actual_s: float | None) -> float | None:
    if actual_s is None or actual_s <= 0:
        return None
    return (estimate_s - actual_s) / actual_s * 100


def _s(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
