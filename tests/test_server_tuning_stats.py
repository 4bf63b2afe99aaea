"""The Server tuning benchmark's reading of a noisy sweep (benchmarks/server_tuning.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "server_tuning.py"


@pytest.fixture(scope="module")
def server_tuning():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("server_tuning", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["server_tuning"] = module
    spec.loader.exec_module(module)
    return module


def test_a_clean_sweep_separates_at_its_last_valid_target(server_tuning) -> None:
    grid = [100.0, 110.0, 120.0, 130.0, 140.0]
    assert server_tuning.separating_threshold(grid, [True, True, True, False, False]) == (120, 0)


def test_one_unlucky_invalid_low_down_does_not_pull_the_threshold_to_it(server_tuning) -> None:
    grid = [100.0, 110.0, 120.0, 130.0, 140.0, 150.0, 160.0]
    valid = [True, False, True, True, True, False, False]
    assert server_tuning.separating_threshold(grid, valid) == (140, 1)


def test_a_lucky_valid_high_up_does_not_lift_it(server_tuning) -> None:
    grid = [100.0, 110.0, 120.0, 130.0, 140.0, 150.0]
    valid = [True, True, False, False, True, False]
    assert server_tuning.separating_threshold(grid, valid) == (110, 1)


def test_ties_take_their_median_and_nothing_valid_has_no_threshold(server_tuning) -> None:
    grid = [100.0, 110.0, 120.0, 130.0]
    # 100 (1 wrong: 120), 120 (1 wrong: 110): the median of the two ties is the upper one
    assert server_tuning.separating_threshold(grid, [True, False, True, False]) == (120, 1)
    assert server_tuning.separating_threshold(grid, [False] * 4) == (None, 0)


def test_the_band_holds_the_thresholds_one_unlucky_probe_apart(server_tuning) -> None:
    grid = [100.0, 110.0, 120.0, 130.0, 140.0, 150.0]
    # 100 misclassifies one probe (130 VALID), 130 two (110 and 120 INVALID): both in it
    valid = [True, False, False, True, False, False]
    assert server_tuning.separating_threshold(grid, valid) == (100, 1)
    assert server_tuning.threshold_band(grid, valid) == (100, 130)
    assert server_tuning.threshold_band(grid, [False] * 6) is None
    assert server_tuning.from_band(135, (100, 130)) == "+3.8 % above it"
    assert server_tuning.from_band(95, (100, 130)) == "-5.0 % below it"
    assert server_tuning.from_band(110, (100, 130)) == "inside it"
