"""The submission flow on the real lab: two SSH hosts in parallel, short mode, a tree that passes
the prechecks, the hosts' runs overlapping in time, and a second run that repeats nothing (Prefect
test harness)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from tests.support.campaigns import write_campaign

pytestmark = pytest.mark.lab


def test_two_hosts_in_parallel_then_nothing_repeated(prefect_api: None, lab_dir: Path,
                                                     tmp_path: Path) -> None:
    from flows.submission import submission

    path = write_campaign(tmp_path, "two-hosts", lab_dir / "hosts.yaml", ["h2", "h3"])
    summary = submission(campaign_file=str(path))
    assert summary.runs == 4 and summary.passed == 4, summary.failed
    assert summary.precheck.startswith("prechecks passed"), summary.precheck
    tree = Path(summary.tree)
    results = tree / "open" / "SubrunLab" / "results"
    assert {p.name for p in results.iterdir()} == {"h2", "h3"}
    assert (results / "h2" / "digits-mlp" / "Offline" / "accuracy" / "accuracy.txt").is_file()
    assert Path(summary.report).is_file() and Path(summary.tarball).is_file()
    store = RunStore(load_campaign(path).paths.store)
    keys = store.keys()
    attempts = {k: len(store.attempts(k)) for k in keys}
    # in parallel: the hosts' spans of runs (first start to last end) overlap in time, and
    # each host ran one run at a time
    spans = {}
    for host in ("h2", "h3"):
        runs = sorted((r for r in store.runs() if r.spec.host == host), key=lambda r: r.started_at)
        assert len(runs) == 2 and runs[0].finished_at <= runs[1].started_at, runs
        spans[host] = (runs[0].started_at, runs[-1].finished_at)
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values()), spans
    again = submission(campaign_file=str(path), track_history=True)  # as nightly does
    assert again.passed == 4
    paths = load_campaign(path).paths
    assert paths.history.is_file()
    assert len(list(paths.trends.glob("*.png"))) == 2  # Offline throughput on h2 and h3
    assert store.keys() == keys
    assert {k: len(store.attempts(k)) for k in keys} == attempts
