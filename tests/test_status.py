"""The status matrix and ETA, from a run store with finished, failed and running attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import RunState, Verdict
from bench.store import RunStore
from flows.status import campaign_status, eta_s, pace


def test_matrix_states_and_eta_follow_the_store(tmp_path: Path) -> None:
    campaign = Campaign.model_validate({"compliance": False, "hosts": [
        {"host": "a", "benchmarks": [{"benchmark": "digits", "scenarios": ["Offline"]}]}]})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    store = RunStore(tmp_path)
    perf, acc = plan.runs
    start = datetime(2026, 11, 1, tzinfo=UTC)
    done = store.start_attempt(perf.spec, started_at=start)
    store.update(done.key, 1, state="finished", verdict=Verdict(passed=True),
                 finished_at=start + timedelta(seconds=2 * perf.estimate_s))
    statuses = campaign_status(plan, store)
    assert [s.word for s in statuses] == ["done", "pending"]
    assert pace(statuses) == pytest.approx(2.0)  # the finished run took twice its estimate
    assert eta_s(plan, statuses) == pytest.approx(2 * acc.estimate_s)
    store.start_attempt(acc.spec)
    assert [s.word for s in campaign_status(plan, store)] == ["done", "running"]
    failed = store.start_attempt(acc.spec)
    store.update(failed.key, failed.attempt, state="failed", error="exited with status 137",
                 finished_at=datetime.now(UTC))
    last = campaign_status(plan, store)[1]
    assert last.word == "failed" and last.state == RunState.FAILED and "137" in last.detail
