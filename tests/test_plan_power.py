"""The plan says which analyzer reads each host's power, and which hosts take turns on one."""

from __future__ import annotations

from bench.campaign import Campaign
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from flows.plan_view import analyzer_notes, plan_markdown
from lab.config import Inventory


def test_shared_analyzer_is_announced_in_the_plan() -> None:
    inventory = Inventory.model_validate({
        "hosts": [{"name": "a", "transport": "local", "power": {"analyzer": "pa"}},
                  {"name": "b", "address": "x", "power": {"analyzer": "pa"}},
                  {"name": "c", "address": "y", "power": {"analyzer": "pc"}}],
        "analyzers": [{"name": "pa", "host": "a"}, {"name": "pc", "host": "a", "port": 8889}]})
    benchmarks = [{"benchmark": "digits", "scenarios": ["Offline"]}]
    campaign = Campaign.model_validate({"power": True, "hosts": [
        {"host": h, "benchmarks": benchmarks} for h in ("a", "b", "c")]})
    plan = make_plan(campaign, {"digits": load_manifest("digits")}, load_rules("v6.1"))
    notes = analyzer_notes(plan, inventory)
    assert notes == ["hosts a, b share analyzer 'pa': their power runs take turns, and a power "
                     "run may wait for another host's",
                     "host c's power is read from analyzer 'pc'"]
    assert "- hosts a, b share analyzer 'pa'" in plan_markdown(plan, notes)
