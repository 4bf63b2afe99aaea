"""Two campaigns on one host at the same moment take turns on it: with a Prefect server in use,
the host is a global concurrency limit both hold around every run, so their runs' [start, end]
intervals on the host never overlap, and `host:h2` is a limit Prefect lists (real lab, real API).
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from flows.slots import slot_names
from tests.support.campaigns import write_campaign


def test_slot_names_are_host_then_analyzer() -> None:
    assert slot_names("h2", None) == ["host:h2"]
    assert slot_names("h2", "sim-wt310e") == ["host:h2", "analyzer:sim-wt310e"]


@pytest.mark.lab
def test_two_campaigns_on_one_host_never_overlap(prefect_api: None, lab_dir: Path,
                                                 tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.submission import submission

    for name in ("full", "nightly"):
        (tmp_path / name).mkdir()
    paths = [write_campaign(tmp_path / name, name, lab_dir / "hosts.yaml", ["h2"],
                            accuracy=False, scenarios=("Offline", "SingleStream"))
             for name in ("full", "nightly")]
    states: dict[str, Any] = {}

    def start(path: Path) -> None:
        states[path.stem] = submission(campaign_file=str(path), return_state=True)

    threads = [threading.Thread(target=start, args=(p,)) for p in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=1200)
    assert all(s.is_completed() for s in states.values()), {k: s.message
                                                           for k, s in states.items()}
    intervals = sorted((r.started_at, r.finished_at)
                       for p in paths for r in RunStore(load_campaign(p).store_dir).runs())
    assert len(intervals) == 4
    for (_, end), (start_next, _) in itertools.pairwise(intervals):
        assert end is not None and end <= start_next, intervals
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name("host:h2")
    assert limit.limit == 1 and limit.active_slots == 0
