"""Training scoring: run counts from mlperf-logging, olympic scores, the M > N window rule."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from bench.training_score import (
    FAILED,
    TimedRun,
    draw_seeds,
    olympic_score,
    required_runs,
    select_runs,
)
from lab.errors import ConfigError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def timed(times: list[float]) -> list[TimedRun]:
    """Runs launched a minute apart, handed over in reverse so selection must sort them."""
    runs = [TimedRun(f"r{i}", T0 + timedelta(minutes=i), t) for i, t in enumerate(times)]
    return list(reversed(runs))


def test_run_counts_come_from_mlperf_logging() -> None:
    assert required_runs("dlrm_dcnv2", "6.0.0") == 10
    assert required_runs("llama31_405b", "6.0.0") == 3
    with pytest.raises(ConfigError, match=r"not part of the training ruleset 6\.0\.0"):
        required_runs("resnet", "6.0.0")
    with pytest.raises(ConfigError, match=r"ruleset '9\.9\.9'"):
        required_runs("dlrm_dcnv2", "9.9.9")


def test_olympic_score_drops_fastest_and_slowest() -> None:
    assert olympic_score([5, 1, 3, 4, 2], "dlrm_dcnv2") == 3.0
    assert olympic_score([5, 1, FAILED, 4, 2], "dlrm_dcnv2") == pytest.approx(11 / 3)
    assert math.isinf(olympic_score([5, FAILED, FAILED, 4, 2], "dlrm_dcnv2"))
    # unet3d drops four at each end and may lose four runs
    times = [float(t) for t in range(1, 37)] + [FAILED] * 4
    assert olympic_score(times, "unet3d") == pytest.approx(sum(range(5, 37)) / 32)
    assert math.isinf(olympic_score([*times[:-5], FAILED] + [FAILED] * 4, "unet3d"))


def test_sliding_window_picks_the_median_set_with_a_failed_run() -> None:
    # N=5 of M=7; by hand (launch order 10, fail, 12, 11, 9, 13, 8):
    #   w0 = 10 inf 12 11 9 -> drop 9 and inf -> (10+11+12)/3 = 11.0
    #   w1 = inf 12 11 9 13 -> drop 9 and inf -> (11+12+13)/3 = 12.0
    #   w2 = 12 11 9 13 8   -> drop 8 and 13  -> (9+11+12)/3 = 10.667
    # median of (11.0, 12.0, 10.667) is 11.0: the first window, failed run included
    selection = select_runs(timed([10, FAILED, 12, 11, 9, 13, 8]), 5, "dlrm_dcnv2")
    assert selection.window_scores == pytest.approx((11.0, 12.0, 32 / 3))
    assert [r.run_id for r in selection.runs] == ["r0", "r1", "r2", "r3", "r4"]
    assert selection.score == pytest.approx(11.0)
    assert selection.valid


def test_an_invalid_median_window_makes_the_result_invalid() -> None:
    # w0 and w1 hold two failed runs each (infinite); w2 = 11 inf 12 13 14 -> 13.0
    selection = select_runs(timed([10, FAILED, 11, FAILED, 12, 13, 14]), 5, "dlrm_dcnv2")
    assert selection.window_scores[2] == pytest.approx(13.0)
    assert not selection.valid
    # an even count of windows: the slower middle one is submitted
    even = select_runs(timed([1, 2, 3, 4, 5, 6]), 3, "dlrm_dcnv2")  # windows score 2, 3, 4, 5
    assert even.score == 4.0


def test_exactly_n_runs_are_all_submitted() -> None:
    selection = select_runs(timed([3, 1, 2]), 3, "gpt3")
    assert [r.run_id for r in selection.runs] == ["r0", "r1", "r2"]
    assert selection.score == 2.0
    with pytest.raises(ValueError):
        select_runs(timed([1, 2]), 3, "gpt3")


def test_seeds_are_distinct_and_avoid_those_taken() -> None:
    seeds = draw_seeds(200, taken=[1, 2, 3])
    assert len(set(seeds)) == 200
    assert not {1, 2, 3} & set(seeds)
    assert all(0 < s < 2**31 for s in seeds)
