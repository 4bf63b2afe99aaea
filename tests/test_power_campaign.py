"""A tracking power run on the real lab: the demo image's two LoadGen passes run in one container
on the controller through the ordinary runner, measured by subrun's daemon driving the
simulated WT310E (an analyzer of its own on a free port, its daemon stopped afterwards)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import RunKind
from bench.store import RunStore
from lab.config import AnalyzerConfig, Inventory
from lab.transport import open_host
from power.track import execute_track
from tests.support.official_power import free_port
from tests.support.targets import provisioned_target

pytestmark = pytest.mark.lab
RULES = load_rules("v6.1")
ANALYZER = "sim-track"


@pytest.fixture
def track_inventory(lab_inventory: Inventory) -> Iterator[Inventory]:
    analyzer = AnalyzerConfig(name=ANALYZER, port=free_port(), host="local")
    yield lab_inventory.model_copy(update={"analyzers": [analyzer]})
    host = open_host(lab_inventory.host("local"))
    daemon = host.find_detached(f"power-daemon-{ANALYZER}")
    if daemon is not None:  # started by this test: stopped by its handle
        host.stop_detached(daemon)


def test_power_run_ranging_then_testing_is_stored_and_judged(track_inventory: Inventory,
                                                             tmp_path: Path) -> None:
    target = provisioned_target(track_inventory, "local")
    campaign = Campaign.model_validate({"power": "track", "hosts": [{"host": "local",
                                        "benchmarks": [{"benchmark": "digits",
                                                        "scenarios": ["Offline"]}]}]})
    plan = make_plan(campaign, {"digits": target.manifest}, RULES)
    planned = next(r for r in plan.runs if r.spec.kind is RunKind.POWER)
    store = RunStore(tmp_path / "store")
    record = execute_track(target, planned, store, RULES, track_inventory, ANALYZER,
                           settle_s=1.0, lock_dir=tmp_path / "locks")
    assert record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict.reason
    assert not record.verdict.submittable
    assert 50 < record.verdict.metrics["power_w"] < 1000  # the busy profile
    assert "ranging_power_w" in record.verdict.metrics
    for name in ("ranging/spl.txt", "ranging/mlperf_log_detail.txt", "run_1/spl.txt",
                 "run_1/mlperf_log_detail.txt", "run_1/mlperf_log_summary.txt"):
        assert name in record.files, sorted(record.files)
    spl = (store.path(record.key, record.attempt) / "run_1" / "spl.txt").read_text()
    assert spl.count("Watts,") >= 3 and spl.endswith("\n\n")
    again = execute_track(target, planned, store, RULES, track_inventory, ANALYZER,
                          lock_dir=tmp_path / "locks")
    assert again.attempt == record.attempt
