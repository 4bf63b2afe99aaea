"""A campaign power run on the real lab: the demo image's LoadGen runs in containers on the
controller, bracketed by subrun's daemon driving the simulated WT310E."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import RunKind
from bench.store import RunStore
from lab.config import Inventory
from power.campaign import execute_power
from tests.support.targets import provisioned_target

pytestmark = pytest.mark.lab
RULES = load_rules("v6.1")


def test_power_run_ranging_then_testing_is_stored_and_judged(lab_inventory: Inventory,
                                                             tmp_path: Path) -> None:
    target = provisioned_target(lab_inventory, "local")
    campaign = Campaign.model_validate({"power": True, "hosts": [{"host": "local", "benchmarks": [
        {"benchmark": "digits", "scenarios": ["Offline"]}]}]})
    plan = make_plan(campaign, {"digits": target.manifest}, RULES)
    planned = next(r for r in plan.runs if r.spec.kind is RunKind.POWER)
    store = RunStore(tmp_path / "store")
    record = execute_power(target, planned, store, RULES, lab_inventory, "sim-wt310e",
                           settle_s=1.0)
    assert record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict.reason
    assert not record.verdict.submittable
    assert 50 < record.verdict.metrics["power_w"] < 1000
    for name in ("ranging/spl.txt", "ranging/mlperf_log_detail.txt", "run_1/spl.txt",
                 "run_1/mlperf_log_detail.txt", "run_1/mlperf_log_summary.txt"):
        assert name in record.files, sorted(record.files)
    again = execute_power(target, planned, store, RULES, lab_inventory, "sim-wt310e")
    assert again.attempt == record.attempt
