"""What a cancelled campaign does below Prefect: nothing new starts on a target, and the flow's
Cancelled state reaches `subrun run` as one clear error. (Stopping runs in flight within 15 s
is measured on real targets in test_deployment_states.py.)"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from prefect.states import Cancelled

from bench.execute import execute
from bench.run import RunKind
from bench.store import RunStore
from flows.states import outcome_of
from lab.errors import RunCancelled


def test_a_cancelled_campaign_starts_no_new_attempt(tmp_path: Path) -> None:
    cancelled = threading.Event()
    cancelled.set()
    target = SimpleNamespace(config=SimpleNamespace(settle_s=0.0), campaign="c",
                             is_cancelled=cancelled.is_set())
    planned = SimpleNamespace(spec=SimpleNamespace(key="k1", label="h/digits/Offline/performance",
                                                   kind=RunKind.PERFORMANCE), estimate_s=10.0)
    store = RunStore(tmp_path / "store")
    with pytest.raises(RunCancelled, match="campaign 'c' was cancelled"):
        execute(target, planned, store, rules=None)  # type: ignore[arg-type]
    assert store.runs() == []  # no attempt opened, nothing started


def test_a_cancelled_flow_run_is_an_error_for_subrun_run() -> None:
    with pytest.raises(RunCancelled, match="2 run\\(s\\) recorded cancelled"):
        outcome_of(Cancelled(message="campaign x cancelled: 2 run(s) recorded cancelled"))
