"""The tuning search (bench.tune_search) against fake hosts: bracketing, bisection, margin,
the confirming probe, resumption, and the one-measurement scenarios."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from bench.run import Scenario
from bench.tune_search import (
    SearchConfig,
    Stop,
    Try,
    bracket,
    next_step,
    probed,
    tuned_key,
)
from bench.tuning_record import Probe

SERVER = Scenario.SERVER
AT = datetime(2025, 1, 1, tzinfo=UTC)


def server_probe(qps: float, valid: bool) -> Probe:
    return Probe(settings={tuned_key(SERVER): qps}, valid=valid, samples_per_s=qps,
                 latency_ns=5e6 if valid else 30e6, duration_s=12.0, at=AT)


def search(capacity: Callable[[float], bool], start: float,
           config: SearchConfig | None = None) -> tuple[list[Probe], Stop]:
    """Run a whole Server search against a fake host: VALID where capacity says so."""
    probes: list[Probe] = []
    while True:
        step = next_step(SERVER, probes, start, config)
        if isinstance(step, Stop):
            return probes, step
        assert not any(probed(p, SERVER) == step.value for p in probes), "a value tried twice"
        probes.append(server_probe(step.value, capacity(step.value)))


@pytest.mark.parametrize("start", [100.0, 1000.0, 2400.0, 6000.0, 50000.0])
def test_server_search_brackets_then_bisects_to_the_resolution(start: float) -> None:
    probes, stop = search(lambda q: q <= 2400, start)
    lo, hi = bracket(SERVER, probes)
    assert lo is not None and hi is not None and (hi - lo) / lo <= 0.02
    assert stop.found == lo and 2400 * 0.98 <= lo <= 2400
    assert stop.chosen == pytest.approx(lo * 0.95, rel=1e-3)
    assert probed(probes[-1], SERVER) == stop.chosen and probes[-1].valid  # the confirmation
    assert len(probes) <= 14  # 50 x off costs five halvings more than a close start


def test_the_bracket_grows_and_shrinks_geometrically() -> None:
    grow, _ = search(lambda q: q <= 3500, 1000)
    assert [probed(p, SERVER) for p in grow[:3]] == [1000, 2000, 4000]
    shrink, _ = search(lambda q: q <= 300, 1000)
    assert [probed(p, SERVER) for p in shrink[:3]] == [1000, 500, 250]


def test_an_overloaded_probe_shrinks_straight_below_what_it_completed() -> None:
    overloaded = server_probe(2637, False).model_copy(update={"samples_per_s": 957.0})
    step = next_step(SERVER, [overloaded], 2637)
    assert isinstance(step, Try) and step.value == 957
    near = server_probe(2637, False).model_copy(update={"samples_per_s": 2500.0})
    assert next_step(SERVER, [near], 2637) == Try(1318, "2637 INVALID: shrink")  # halving


def test_a_coarser_resolution_costs_fewer_probes() -> None:
    fine, _ = search(lambda q: q <= 2400, 1000, SearchConfig(resolution=0.02))
    coarse, stop = search(lambda q: q <= 2400, 1000, SearchConfig(resolution=0.1))
    assert len(coarse) < len(fine)
    assert stop.found is not None and stop.found >= 2400 / 1.1


def test_margin_zero_or_no_confirmation_ends_at_the_bracket() -> None:
    confirmed, stop = search(lambda q: q <= 2400, 1000)
    bare, stop0 = search(lambda q: q <= 2400, 1000, SearchConfig(margin=0.0))
    assert stop0.chosen == stop0.found == stop.found and len(bare) == len(confirmed) - 1
    unconfirmed, stop1 = search(lambda q: q <= 2400, 1000, SearchConfig(confirm=False))
    assert len(unconfirmed) == len(confirmed) - 1 and stop1.chosen == stop.chosen


def test_an_invalid_confirmation_searches_on_below_it() -> None:
    """A host slower at the confirmation (noise) makes that value the new upper end."""
    probes: list[Probe] = []
    failed: float | None = None
    while isinstance(step := next_step(SERVER, probes, 1000), Try):
        noisy = failed is None and step.why.startswith("confirm")
        failed = step.value if noisy else failed
        probes.append(server_probe(step.value, step.value <= 2400 and not noisy))
    assert failed is not None and step.found is not None and step.found < failed
    assert probes[-1].valid and probed(probes[-1], SERVER) == step.chosen


def test_a_valid_probe_above_an_invalid_one_is_noise() -> None:
    probes = [server_probe(1000, True), server_probe(2000, False), server_probe(3000, True)]
    assert bracket(SERVER, probes) == (1000, 2000)


def test_the_probe_budget_ends_the_search_with_the_best_valid() -> None:
    probes, stop = search(lambda q: q <= 2400, 1000, SearchConfig(max_probes=4))
    assert len(probes) == 4 and stop.found == 2000 and "budget" in stop.why


def test_nothing_valid_down_to_the_floor() -> None:
    probes, stop = search(lambda q: False, 10, SearchConfig(min_qps=1))
    assert stop.found is None and stop.chosen is None and len(probes) == 4


@pytest.mark.parametrize("cut", range(1, 9))
def test_resumed_from_the_recorded_probes_the_search_takes_the_same_steps(cut: int) -> None:
    """A search killed after `cut` probes and started again from its record proposes exactly
    what the uninterrupted one did, and ends at the same value."""
    whole, stop = search(lambda q: q <= 2400, 1000)
    kept = [Probe.model_validate_json(p.model_dump_json()) for p in whole[:cut]]  # via JSON
    resumed = list(kept)
    while isinstance(step := next_step(SERVER, resumed, 1000), Try):
        resumed.append(server_probe(step.value, step.value <= 2400))
    assert [probed(p, SERVER) for p in resumed] == [probed(p, SERVER) for p in whole]
    assert step == stop


def offline_probe(target: float, rate: float, valid: bool) -> Probe:
    return Probe(settings={tuned_key(Scenario.OFFLINE): target}, valid=valid,
                 samples_per_s=rate, duration_s=10.0, at=AT)


def test_offline_takes_the_sustained_rate_with_the_margin_upwards() -> None:
    assert next_step(Scenario.OFFLINE, [], 12000) == Try(12000, "a first measurement")
    stop = next_step(Scenario.OFFLINE, [offline_probe(12000, 5988.6, True)], 12000)
    assert isinstance(stop, Stop) and stop.found == 5988.6
    assert stop.chosen == pytest.approx(5988.6 * 1.05, rel=1e-3)


def test_offline_ran_out_of_samples_is_measured_again_at_its_rate() -> None:
    first = offline_probe(100, 4000, False)  # 1.1 x 100 x 10 s of samples: over too soon
    step = next_step(Scenario.OFFLINE, [first], 100)
    assert isinstance(step, Try) and step.value == 4000
    stop = next_step(Scenario.OFFLINE, [first, offline_probe(4000, 5900, True)], 100)
    assert isinstance(stop, Stop) and stop.found == 5900


@pytest.mark.parametrize("scenario", [Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM])
def test_streams_take_the_reported_percentile_less_the_margin(scenario: Scenario) -> None:
    probe = Probe(settings={tuned_key(scenario): 0.5}, valid=True, latency_ns=958086,
                  mean_latency_ns=802251, duration_s=10.0, at=AT)
    assert tuned_key(scenario).endswith(".target_latency")
    stop = next_step(scenario, [probe], 0.5)
    assert isinstance(stop, Stop) and stop.found == pytest.approx(0.958086)
    assert stop.chosen == pytest.approx(0.958086 * 0.95, rel=1e-3)


def test_a_stream_percentile_far_above_the_mean_is_capped() -> None:
    probe = Probe(settings={tuned_key(Scenario.SINGLE_STREAM): 0.5}, valid=True,
                  latency_ns=4e6, mean_latency_ns=1e6, duration_s=10.0, at=AT)
    stop = next_step(Scenario.SINGLE_STREAM, [probe], 0.5)
    assert isinstance(stop, Stop) and stop.chosen == pytest.approx(1.5 * 0.95)
