"""One state vocabulary and one "passed": a run.json of an older store still loads, and every
layer answers "did it pass" with bench.submitted.passed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.run import Mode, RunKind, RunRecord, RunSpec, RunState, Scenario, Verdict
from bench.store import RunStore
from bench.submitted import passed
from submission.inputs import StoredRun

SPEC = RunSpec(host="h2", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
               kind=RunKind.PERFORMANCE, mode=Mode.SHORT, round="v6.1")


def _record(state: str, verdict: Verdict | None) -> RunRecord:
    return RunRecord(spec=SPEC, key=SPEC.key, attempt=1, state=state,  # type: ignore[arg-type]
                     started_at=datetime.now(UTC), verdict=verdict)


@pytest.mark.parametrize(("state", "verdict", "expected"), [
    ("finished", Verdict(passed=True), True),
    ("finished", Verdict(passed=False, reason="INVALID"), False),
    ("finished", None, False),
    ("failed", Verdict(passed=True), False),  # a verdict never outweighs the attempt's end
    ("cancelled", None, False),
    ("running", None, False),
])
def test_passed_is_finished_with_a_passing_verdict(state: str, verdict: Verdict | None,
                                                   expected: bool) -> None:
    record = _record(state, verdict)
    assert record.state is RunState(state)
    assert passed(record) is expected
    assert StoredRun(record, Path("/nowhere")).passed is expected
    assert passed(None) is False


def test_an_older_run_json_with_retry_settings_loads_as_rerun_settings(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    record = store.start_attempt(SPEC)
    path = store.path(record.key, 1) / "run.json"
    old = json.loads(path.read_text())
    old["state"] = "finished"
    old["verdict"] = {"passed": False, "reason": "INVALID",
                      "retry_settings": {"*.Offline.target_qps": 900}}
    path.write_text(json.dumps(old))
    loaded = store.record(record.key, 1)
    assert loaded.state is RunState.FINISHED and not passed(loaded)
    assert loaded.verdict is not None
    assert loaded.verdict.rerun_settings == {"*.Offline.target_qps": 900}
    assert "rerun_settings" in loaded.verdict.model_dump_json()  # written in the new spelling


def test_only_lost_and_cancelled_end_unjudged() -> None:
    assert {s for s in RunState if s.ended_unjudged} == {RunState.LOST, RunState.CANCELLED}
