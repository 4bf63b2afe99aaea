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


# with both cores saturated by other tests the analyzer daemon's samples stopped for 12 s inside
# LoadGen's power window, and the run was rightly failed: a timing of its own
@pytest.mark.serial
def test_track_campaign_measures_but_keeps_power_out_of_the_tree(
        prefect_api: None, lab_dir: Path, track_inventory: Inventory,
        tmp_path: Path) -> None:
    import yaml

    from flows.submission import submission
    from tests.support.campaigns import QUICK_POWER_SCENARIOS, write_campaign

    hosts = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    hosts["analyzers"] = [a.model_dump(mode="json", exclude_none=True)
                          for a in track_inventory.analyzers]
    for host in hosts["hosts"]:  # every host is measured by the test's own analyzer
        host["power"] = {"analyzer": ANALYZER}
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump(hosts, sort_keys=False))
    path = write_campaign(tmp_path, "track-power", inventory, ["h2"], power=True,  # short
                          scenarios=QUICK_POWER_SCENARIOS)
    summary = submission(campaign_file=str(path))
    assert summary.runs == 3 and summary.passed == 3, summary.failed
    store = RunStore(tmp_path / "out" / "track-power" / "store")
    power = next(r for r in store.runs() if r.spec.kind is RunKind.POWER)
    assert power.verdict is not None and not power.verdict.submittable
    assert "tracking only" in next(c.detail for c in power.verdict.checks if c.name == "power")
    performance = next(Path(summary.tree).glob(
        f"open/*/results/h2/*/{QUICK_POWER_SCENARIOS[0]}/performance"))
    assert not (performance / "power").exists()  # subrun's daemon never enters the tree
