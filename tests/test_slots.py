"""Two campaigns on one host at the same moment take turns on it: with a Prefect server in use,
the host is a global concurrency limit both hold around every run, so their runs' [start, end]
intervals on the host never overlap, and `host:h2` is a limit Prefect lists (real lab, real API).
A waiting run names the flow run holding its slot (once per holder), the record goes with the
slot, a record of a flow run no longer running is ignored then removed, and another campaign's
hold on a host is counted for that host only (real Prefect server).
"""

from __future__ import annotations

import itertools
import re
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from flows.holders import Holder
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
                       for p in paths for r in RunStore(load_campaign(p).paths.store).runs())
    assert len(intervals) == 4
    for (_, end), (start_next, _) in itertools.pairwise(intervals):
        assert end is not None and end <= start_next, intervals
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name("host:h2")
    assert limit.limit == 1 and limit.active_slots == 0


def _flow_run() -> tuple[str, str]:
    from prefect.context import FlowRunContext

    found = FlowRunContext.get()
    assert found is not None
    return str(found.flow_run.id), found.flow_run.name


def test_a_waiting_run_names_the_holder_once_and_the_record_goes_with_the_slot(
        prefect_api: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect import flow

    from flows import holders, slots

    monkeypatch.setattr(slots, "POLL_S", 0.5)
    slot = f"host:holders-{uuid.uuid4().hex[:6]}"
    holding, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}
    told: list[str] = []

    @flow(name="holds-a-host")
    def hold() -> None:
        run_id, name = _flow_run()
        seen["holder"] = (run_id, name)
        me = Holder(run_id, name, "camp-a", "local/digits/Offline/performance", 30.0, 10.0)
        with slots.held([slot], me, lambda _: None):
            holding.set()
            release.wait(60)

    @flow(name="waits-for-a-host")
    def waits() -> None:
        run_id, name = _flow_run()
        me = Holder(run_id, name, "camp-b", "local/digits/Offline/power", 5.0, 5.0)
        with slots.held([slot], me, told.append):
            seen["while-waiter-holds"] = holders.current(slot)

    first = threading.Thread(target=hold)
    first.start()
    assert holding.wait(120)
    waiter = threading.Thread(target=waits)
    waiter.start()
    deadline = datetime.now(UTC) + timedelta(seconds=60)
    while not told and datetime.now(UTC) < deadline:
        threading.Event().wait(0.2)
    threading.Event().wait(2.0)  # several looks at the holder: it is named once, not again
    release.set()
    first.join(60)
    waiter.join(60)

    run_id, name = seen["holder"]
    assert len(told) == 1, told
    assert re.fullmatch(
        rf"waiting: {slot} is held by flow run '{name}' \({run_id}\) of campaign 'camp-a', "
        r"run local/digits/Offline/performance, since \d\d:\d\d:\d\d; that campaign has "
        r"about \d+ s of runs left on its host", told[0]), told[0]
    assert seen["while-waiter-holds"].campaign == "camp-b"  # the record moved with the slot
    assert holders.current(slot) is None  # and went before the slot was released


def test_a_record_of_a_flow_run_no_longer_running_is_ignored_then_removed(
        prefect_api: None) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client

    from flows import holders

    @flow(name="ended-holder")
    def ended() -> tuple[str, str]:
        return _flow_run()

    run_id, name = ended()
    slot = f"host:stale-{uuid.uuid4().hex[:6]}"
    holders.record(slot, Holder(run_id, name, "gone", "x/y/Offline/performance", 99.0, 9.0))
    with get_client(sync_client=True) as client:
        assert client.read_variable_by_name(holders.variable_name(slot)) is not None
        assert holders.current(slot) is None  # its flow run is Completed: ignored
        assert client.read_variable_by_name(holders.variable_name(slot)) is None  # removed
    holders.record(slot, Holder(run_id, name, "gone", "x/y/Offline/performance", 99.0, 9.0))
    assert holders.other_campaigns_on("mine", [slot.removeprefix("host:")]) == {}


def test_another_campaign_holding_a_host_is_counted_for_that_host_only(
        prefect_api: None) -> None:
    from prefect import flow

    from flows import holders

    host = f"shared-{uuid.uuid4().hex[:6]}"

    @flow(name="live-holder")
    def live() -> dict[str, Holder]:
        run_id, name = _flow_run()
        holders.record(f"host:{host}", Holder(run_id, name, "theirs", "r", 40.0, 10.0))
        try:
            return {"theirs": holders.other_campaigns_on("mine", [host, "elsewhere"]),
                    "own": holders.other_campaigns_on("theirs", [host])}
        finally:
            holders.release(f"host:{host}", run_id)

    found = live()
    assert list(found["theirs"]) == [host] and found["theirs"][host].campaign == "theirs"
    assert 29.0 < found["theirs"][host].left_s() <= 40.0
    assert found["own"] == {}  # a campaign never waits for itself


def test_plan_and_status_count_another_campaign_holding_the_host(
        prefect_api: None, lab_dir: Path, tmp_path: Path) -> None:
    from prefect import flow
    from typer.testing import CliRunner

    from flows import holders
    from flows.cli import app

    path = write_campaign(tmp_path, "counts-waits", lab_dir / "hosts.yaml", ["h3"],
                          accuracy=False)
    alone = CliRunner().invoke(app, ["plan", str(path)])
    assert alone.exit_code == 0 and "wait:" not in alone.output, alone.output

    @flow(name="holds-h3-for-another-campaign")
    def other() -> tuple[str, str, str]:
        run_id, name = _flow_run()
        holders.record("host:h3", Holder(run_id, name, "theirs", "h3/x/Offline/power",
                                         remaining_s=3600.0, run_s=60.0))
        try:
            return (name, CliRunner().invoke(app, ["plan", str(path)]).output,
                    CliRunner().invoke(app, ["status", str(path)]).output)
        finally:
            holders.release("host:h3", run_id)

    name, plan, status = other()
    for shown in (plan, status):
        assert f"wait: host h3 is held by flow run '{name}' of campaign 'theirs'" in " ".join(
            shown.split()), shown
    assert "estimated wall time 1 h" in " ".join(plan.split()), plan  # the hour it holds h3
    assert re.search(r"about 1 h \d\d min left", " ".join(status.split())), status
