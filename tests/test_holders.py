"""What a slot's holder says and what its wait adds to a plan: the arithmetic, no server (the
records on a real server are tested in test_slots.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from flows.holders import Holder
from flows.plan_view import wait_notes, wall_time_s
from flows.status import RunStatus, eta_s

HOLDER = Holder("id", "papaya-sponge", "served-full", "local/digits/Offline/power",
                remaining_s=50.0, run_s=20.0, slot="host:local")


def test_left_counts_later_runs_and_what_remains_of_this_one() -> None:
    now = datetime(2026, 1, 1, 7, 50, 56, tzinfo=UTC)
    started = replace(HOLDER, since=now)
    assert started.left_s(now + timedelta(seconds=12)) == 38.0
    assert started.left_s(now + timedelta(seconds=90)) == 30.0  # overran: the rest still waits
    words = started.describe(now + timedelta(seconds=12))
    assert words.startswith("host:local is held by flow run 'papaya-sponge' (id) of campaign "
                            "'served-full', run local/digits/Offline/power, since ")
    assert words.endswith("that campaign has about 38 s of runs left on its host")


def test_wall_time_and_eta_add_the_wait_on_a_shared_host() -> None:
    runs = {"a": 100.0, "b": 60.0}
    plan = SimpleNamespace(hosts=lambda: list(runs), host_estimate_s=runs.__getitem__)
    assert wall_time_s(plan, {}) == 100.0  # type: ignore[arg-type]
    assert wall_time_s(plan, {"b": 50.0}) == 110.0  # type: ignore[arg-type]
    statuses = [RunStatus(SimpleNamespace(spec=SimpleNamespace(host=h),  # type: ignore[arg-type]
                                          estimate_s=s), None) for h, s in runs.items()]
    assert eta_s(plan, statuses) == 100.0  # type: ignore[arg-type]
    assert eta_s(plan, statuses, {"b": 50.0}) == 110.0  # type: ignore[arg-type]
    [note] = wait_notes({"b": replace(HOLDER, since=datetime.now(UTC))})
    assert "host b is held by flow run 'papaya-sponge' of campaign 'served-full'" in note


def test_work_left_counts_this_run_and_later_ones_not_passed_yet() -> None:
    from flows.status import work_left_s

    def run(label: str, estimate_s: float) -> SimpleNamespace:
        return SimpleNamespace(label=label, estimate_s=estimate_s,
                               spec=SimpleNamespace(host="h", key=label))

    runs = [run("perf", 10.0), run("acc", 20.0), run("test01", 30.0), run("power", 40.0)]
    passed = SimpleNamespace(state="finished", verdict=SimpleNamespace(passed=True))
    store = SimpleNamespace(latest=lambda key: passed if key == "test01" else None)
    plan = SimpleNamespace(for_host=lambda host: runs)
    assert work_left_s(plan, runs[1], store) == 60.0  # type: ignore[arg-type]
    assert work_left_s(plan, runs[2], store) == 70.0  # type: ignore[arg-type]  # itself counts
