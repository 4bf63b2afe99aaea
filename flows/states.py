"""Prefect states that tell the truth about MLPerf verdicts.

Automations, notifications and dashboards key on states, so a run whose verdict is not passed
must not look Completed, and a campaign is Completed only when every run passed. The outcome
itself stays in the run store and the report; the state only carries it and says why.
"""

from __future__ import annotations

from typing import Any

from prefect.states import Completed, Failed, State

from flows.steps import RunOutcome
from lab.errors import RunCancelled


def run_state(outcome: RunOutcome) -> State[Any]:
    """Completed for a passed run, else Failed with the reason as message (data: the outcome)."""
    if outcome.passed:
        return Completed(data=outcome, message=f"{outcome.label}: passed")
    return Failed(data=outcome, message=f"{outcome.label} {outcome.state}: {outcome.reason}")


def campaign_message(summary: dict[str, Any]) -> str:
    """One line for the flow run: how many passed, and which runs failed or did not run."""
    line = f"campaign {summary['campaign']}: {summary['passed']}/{summary['runs']} runs passed"
    if summary["failed"]:
        line += "; failed: " + "; ".join(summary["failed"])
    if summary["not_run"]:
        line += f"; {summary['not_run']} run(s) did not run"
    return line


def campaign_state(summary: dict[str, Any]) -> State[Any]:
    """Completed only when every run passed; Failed otherwise. The summary is the result."""
    message = campaign_message(summary)
    if summary["failed"] or summary["not_run"] or summary["passed"] < summary["runs"]:
        return Failed(data=summary, message=message)
    return Completed(data=summary, message=message)


def summary_of(state: State[Any]) -> dict[str, Any]:
    """The campaign summary a finished flow run holds; an exception it ended with is raised."""
    if state.is_cancelled():  # its runs in flight were stopped and recorded cancelled
        raise RunCancelled(state.message or "The campaign was cancelled.")
    found = state.result(raise_on_failure=False)
    if isinstance(found, BaseException):
        raise found
    if not isinstance(found, dict):
        raise RuntimeError(f"The campaign ended {state.name} without a summary: {state.message}")
    return found
