"""Prefect states that tell the truth about MLPerf verdicts.

Automations, notifications and dashboards key on states, so a run whose verdict is not passed
must not look Completed, and a campaign is Completed only when every run passed. The outcome
itself stays in the run store and the report; the state only carries it and says why.
"""

from __future__ import annotations

from typing import Any

from prefect.states import Completed, Failed, State

from flows.outcome import CampaignOutcome, RunOutcome, TrainingOutcome
from lab.errors import RunCancelled, SubrunError


def run_state(outcome: RunOutcome) -> State[RunOutcome]:
    """Completed for a passed run, else Failed with the reason as message (data: the outcome)."""
    if outcome.passed:
        return Completed(data=outcome, message=f"{outcome.label}: passed")
    return Failed(data=outcome, message=f"{outcome.label} {outcome.state}: {outcome.reason}")


def refused_state(error: SubrunError) -> State[Any]:
    """Failed with the error as its message and its result, for a campaign stopped by something
    the user must fix (a system description not ready, a bad setting): `outcome_of` raises it
    again, so `subrun run` prints the one paragraph and exits with its status. Raised out of the
    flow instead, Prefect's engine logs it with a traceback first."""
    return Failed(data=error, message=str(error))


def campaign_state(outcome: CampaignOutcome) -> State[CampaignOutcome]:
    """Completed only when every run passed; Failed otherwise. The outcome is the result."""
    if outcome.all_passed:
        return Completed(data=outcome, message=outcome.message)
    return Failed(data=outcome, message=outcome.message)


def outcome_of(state: State[Any]) -> CampaignOutcome:
    """The campaign outcome a finished flow run holds; an exception it ended with is raised."""
    found = _result_of(state)
    if not isinstance(found, CampaignOutcome):
        raise RuntimeError(f"The campaign ended {state.name} without an outcome: {state.message}")
    return found


def training_outcome_of(state: State[Any]) -> TrainingOutcome:
    """The outcome a finished training flow run holds; an exception it ended with is raised."""
    found = _result_of(state)
    if not isinstance(found, TrainingOutcome):
        raise RuntimeError(f"The training campaign ended {state.name} without an outcome: "
                           f"{state.message}")
    return found


def _result_of(state: State[Any]) -> Any:
    if state.is_cancelled():  # its runs in flight were stopped and recorded cancelled
        raise RunCancelled(state.message or "The campaign was cancelled.")
    found = state.result(raise_on_failure=False)
    if isinstance(found, BaseException):
        raise found
    return found
