"""Prefect events for what people automate on: run verdicts, nightly regressions, campaign ends.

Prefect automations trigger on events (and states); a log warning triggers nothing. Each event
names its resource (run, series, campaign) and carries host, benchmark, scenario and metric in
its payload, so an automation's template can say what happened without reading the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.events import emit_event

from bench.run import RunSpec
from flows.outcome import CampaignOutcome, RunOutcome
from submission.history import Regression, headline, regressions


def run_event(campaign: str, spec: RunSpec, outcome: RunOutcome) -> dict[str, Any]:
    """`subrun.run.passed|failed` for one run's verdict."""
    found = headline(dict(outcome.metrics))
    return {
        "event": f"subrun.run.{'passed' if outcome.passed else 'failed'}",
        "resource": {"prefect.resource.id": f"subrun.run.{campaign}.{outcome.key}",
                     "prefect.resource.name": outcome.label},
        "payload": {"campaign": campaign, "run_key": outcome.key, "attempt": outcome.attempt,
                    "host": spec.host, "benchmark": spec.benchmark,
                    "scenario": spec.scenario.value, "kind": spec.kind.value,
                    "metric": found[0] if found else None, "value": found[1] if found else None,
                    "metrics": dict(outcome.metrics), "state": str(outcome.state),
                    "reason": outcome.reason},
    }


def regression_event(campaign: str, regression: Regression) -> dict[str, Any]:
    """`subrun.nightly.regression` for a series whose newest value is worse than its median."""
    s = regression.series
    return {
        "event": "subrun.nightly.regression",
        "resource": {"prefect.resource.id":
                     f"subrun.series.{s.host}.{s.benchmark}.{s.scenario}.{s.metric}",
                     "prefect.resource.name": s.title},
        "payload": {"campaign": campaign, "host": s.host, "benchmark": s.benchmark,
                    "scenario": s.scenario, "metric": s.metric, "baseline": regression.baseline,
                    "latest": regression.latest, "change_pct": round(regression.change_pct, 2),
                    "description": regression.describe()},
    }


def campaign_event(outcome: CampaignOutcome, completed: bool) -> dict[str, Any]:
    """`subrun.campaign.finished` with the counts and every failed run."""
    return {
        "event": "subrun.campaign.finished",
        "resource": {"prefect.resource.id": f"subrun.campaign.{outcome.campaign}",
                     "prefect.resource.name": outcome.campaign},
        "payload": {"campaign": outcome.campaign, "completed": completed,
                    "runs": outcome.runs, "passed": outcome.passed,
                    "failed": list(outcome.failed), "not_run": outcome.not_run,
                    "report": outcome.report or None},
    }


def emit(event: dict[str, Any]) -> None:
    """Send one event built above to the Prefect API (dropped quietly when there is none)."""
    emit_event(**event)


def emit_regressions(campaign: str, db: Path, *, threshold_pct: float = 5.0) -> list[Regression]:
    """One `subrun.nightly.regression` event per regression in the history; returns them."""
    found = regressions(db, threshold_pct=threshold_pct)
    for regression in found:
        emit(regression_event(campaign, regression))
    return found
