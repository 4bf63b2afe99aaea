"""Prefect states tell the truth: a run whose verdict is not passed is a Failed task run with
the reason, and a campaign is Completed only when every run passed (real ephemeral API, lab)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.run import RunState
from flows.outcome import CampaignOutcome, RunOutcome
from flows.states import campaign_state, outcome_of, run_state
from tests.support.campaigns import write_campaign


def summary(**changes: Any) -> CampaignOutcome:
    return CampaignOutcome(**{"campaign": "c", "runs": 2, "passed": 2, **changes})


def test_campaign_is_completed_only_when_every_run_passed() -> None:
    done = campaign_state(summary())
    assert done.is_completed() and outcome_of(done) == summary()  # the result is the outcome
    failed = campaign_state(summary(passed=1, failed=("h2/digits/Offline/performance: INVALID",)))
    assert failed.is_failed() and "h2/digits/Offline/performance: INVALID" in failed.message
    assert outcome_of(failed).failed == ("h2/digits/Offline/performance: INVALID",)
    assert campaign_state(summary(passed=1, not_run=1)).is_failed()
    assert "1 run(s) did not run" in summary(passed=1, not_run=1).message
    assert campaign_state(summary(passed=1)).is_failed()  # a run unaccounted for is no pass


def test_run_state_carries_the_reason_and_the_outcome() -> None:
    outcome = RunOutcome("h2/digits/Offline/performance", "k", 1, RunState.FINISHED, False,
                         "LoadGen judged the run INVALID")
    state = run_state(outcome)
    assert state.is_failed() and "INVALID" in (state.message or "")
    assert run_state(RunOutcome("l", "k", 1, RunState.FINISHED, True, "")).is_completed()


def _task_states(flow_run_id: Any) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, TaskRunFilter

    async def read() -> dict[str, Any]:
        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter())
            return {r.name: r.state for r in runs}

    return asyncio.run(read())


def _event(name: str, campaign: str) -> dict[str, Any]:
    """The payload of the event called name from campaign, once the API has stored it."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter

    deadline = time.monotonic() + 120  # events arrive asynchronously; generous when busy
    while True:
        with get_client(sync_client=True) as client:
            page = client.read_events(filter=EventFilter(event=EventNameFilter(name=[name])),
                                      limit=50)
        found = [e.payload for e in page.events if e.payload.get("campaign") == campaign]
        if found or time.monotonic() > deadline:
            assert found, f"no {name} event from campaign {campaign}"
            return found[0]
        time.sleep(1)


@pytest.mark.lab
def test_a_failed_run_fails_its_task_and_the_campaign(prefect_api: None, lab_dir: Path,
                                                      tmp_path: Path) -> None:
    from flows.submission import submission

    # Offline at 50 QPS ends long before the minimum duration: LoadGen says INVALID, and
    # with max_reruns 0 nothing re-runs it
    path = write_campaign(tmp_path, "one-fails", lab_dir / "hosts.yaml", ["h2", "h3"],
                          accuracy=False)
    data = yaml.safe_load(path.read_text())
    data["max_reruns"] = 0
    data["hosts"][0]["benchmarks"][0]["settings"] = {"Offline": {"target_qps": 50}}
    path.write_text(yaml.safe_dump(data))
    state = submission(campaign_file=str(path), return_state=True)
    assert state.is_failed(), state
    assert "h2/digits/Offline/performance" in (state.message or "")
    assert "h3" not in (state.message or "")
    result = state.result(raise_on_failure=False)
    assert result.passed == 1 and len(result.failed) == 1
    tasks = _task_states(state.state_details.flow_run_id)
    assert tasks["h2/digits/Offline/performance"].is_failed()
    assert "INVALID" in (tasks["h2/digits/Offline/performance"].message or "")
    assert tasks["h3/digits/Offline/performance"].is_completed()
    failed = _event("subrun.run.failed", "one-fails")
    assert (failed["host"], failed["benchmark"], failed["scenario"]) == ("h2", "digits", "Offline")
    assert failed["run_key"] and "INVALID" in failed["reason"]
    finished = _event("subrun.campaign.finished", "one-fails")
    assert finished["completed"] is False and finished["passed"] == 1

    passing = write_campaign(tmp_path, "all-pass", lab_dir / "hosts.yaml", ["h3"],
                             accuracy=False)
    state = submission(campaign_file=str(passing), return_state=True)
    assert state.is_completed(), state.message
    assert state.result().passed == 1
