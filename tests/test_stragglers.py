"""A run whose task ended while its container ran on (the controller's side failed, the target's
did not) is reattached, collected and judged before the campaign ends: no attempt is left
`running`, none is run twice, nothing of the campaign is left on the host (Prefect test
harness, lab host h2)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from bench import target as remote
from bench.campaign import load_campaign
from bench.run import RunState
from bench.store import RunStore
from lab.config import Inventory
from tests.support.campaigns import write_campaign
from tests.support.containers import left_on

pytestmark = pytest.mark.lab


def test_a_run_whose_task_failed_while_its_container_ran_is_collected_before_the_end(
        prefect_api: None, lab_dir: Path, lab_inventory: Inventory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.submission import submission

    real_wait, waits = remote.wait, []

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        waits.append(args)
        if len(waits) == 1:  # the controller's side fails; the container runs on
            raise RuntimeError("injected: the task failed while its run went on")
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(remote, "wait", fails_once)
    name = f"straggler-{uuid.uuid4().hex[:6]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"], accuracy=False)
    summary = submission(campaign_file=str(path))
    assert (summary.runs, summary.passed, summary.not_run) == (1, 1, 0), summary
    assert len(waits) == 2  # the failed task's wait, then the reattached one
    (key,) = (store := RunStore(load_campaign(path).paths.store)).keys()
    (attempt,) = store.attempts(key)  # collected, not run again
    assert attempt.state == RunState.FINISHED, attempt
    assert attempt.verdict is not None and attempt.verdict.passed, attempt
    assert left_on(lab_inventory, "h2", name) == []
