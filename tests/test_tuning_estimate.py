"""The tuning step told before it runs: which searches a campaign asks for as far as the book
tells before provisioning, their typical probes and time, and the plan's view of them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.estimate import RUN_OVERHEAD_S
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import Scenario
from bench.tuning_estimate import (
    SIZING_GUESS_S,
    TYPICAL_PROBES,
    planned_searches,
    tuning_seconds,
)
from bench.tuning_record import Probe, TuningBook, TuningKey
from flows.plan_view import plan_markdown, wall_time_s

AT = datetime(2025, 1, 1, tzinfo=UTC)
DIGITS = {"digits": load_manifest("digits")}
SCENARIOS = ["SingleStream", "Offline", "Server"]


def campaign(tmp_path: Path, tune: object = "auto", hosts: tuple[str, ...] = ("h2",),
             settings: dict[str, object] | None = None) -> Campaign:
    return Campaign.model_validate({
        "name": "c", "output_dir": str(tmp_path), "tune": tune, "tune_probe_s": 5,
        "accuracy": False, "compliance": False,
        "hosts": [{"host": h, "benchmarks": [{"benchmark": "digits", "scenarios": SCENARIOS,
                                              "settings": settings or {}}]} for h in hosts]})


def finish(book: TuningBook, scenario: Scenario, by: str = "other", round: str = "v6.1") -> None:
    key = TuningKey("h2", "digits", scenario, "sha256:aaaa", "6.0.17", round)
    book.begin(key, by)
    book.add_probe(key, Probe(settings={}, valid=True, duration_s=6, at=AT))
    book.finish(key, chosen={}, found=1.0, margin=0.05)


def test_a_campaign_without_records_plans_every_search_offline_first(tmp_path: Path) -> None:
    c = campaign(tmp_path)
    searches = planned_searches(c, DIGITS, TuningBook(c.paths.tuning), {"h2": 0.5})
    assert [s.scenario for s in searches] == [Scenario.OFFLINE, Scenario.SINGLE_STREAM,
                                              Scenario.SERVER]
    probe_s = 5 + RUN_OVERHEAD_S + 0.5
    offline, stream, server = searches
    assert offline.probes == 2 and offline.seconds == pytest.approx(
        probe_s + SIZING_GUESS_S + RUN_OVERHEAD_S + 0.5)  # the sizing probe, then one
    assert stream.probes == 1 and stream.seconds == pytest.approx(probe_s)
    # short mode's confirmation lasts a probe: the official run is shorter
    assert server.probes == TYPICAL_PROBES[Scenario.SERVER] + 1
    assert server.seconds == pytest.approx(server.probes * probe_s)
    assert tuning_seconds(searches) == {"h2": pytest.approx(sum(s.seconds for s in searches))}
    assert not planned_searches(campaign(tmp_path, tune=False), DIGITS, TuningBook(tmp_path))


def test_a_record_of_the_round_stands_in_before_provisioning(tmp_path: Path) -> None:
    c = campaign(tmp_path)
    book = TuningBook(c.paths.tuning)
    finish(book, Scenario.OFFLINE)
    finish(book, Scenario.SERVER, round="v6.0")  # another round's: not used
    auto = planned_searches(c, DIGITS, book)
    assert [s.scenario for s in auto] == [Scenario.SINGLE_STREAM, Scenario.SERVER]
    mine = campaign(tmp_path, tune=True)  # true: only this campaign's own records are kept
    assert len(planned_searches(mine, DIGITS, book)) == 3
    finish(book, Scenario.OFFLINE, by="c")
    assert [s.scenario for s in planned_searches(mine, DIGITS, book)] == [
        Scenario.SINGLE_STREAM, Scenario.SERVER]
    explicit = campaign(tmp_path, settings={"Server": {"target_qps": 700}})
    assert [s.scenario for s in planned_searches(explicit, DIGITS, book)] == [
        Scenario.SINGLE_STREAM]


def test_the_plan_lists_each_search_and_counts_tuning_in_the_wall_time(tmp_path: Path) -> None:
    c = campaign(tmp_path, hosts=("a", "b"))
    plan = make_plan(c, DIGITS, load_rules(c.round))
    searches = planned_searches(c, DIGITS, TuningBook(c.paths.tuning))
    tuning = tuning_seconds(searches)
    assert set(tuning) == {"a", "b"}
    assert wall_time_s(plan, None, tuning) == pytest.approx(plan.estimate_s + tuning["a"])
    text = plan_markdown(plan, [], None, searches)
    rows = [line for line in text.splitlines() if "| tuning |" in line]
    assert len(rows) == 6 and "| digits | Offline | tuning |" in rows[0] and "2 probes" in rows[0]
    assert "1 probe |" in rows[1]
    assert "Tuning: 6 searches before the runs" in text
    assert "revised after tuning" in text
    assert "| tuning |" not in plan_markdown(plan)
