"""The sizes of short-mode runs that are compared with each other, read from short_mode.yaml.

Why each number is what it is lives in the YAML beside it, with the measurements it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from bench.run import Scenario

SIZES = Path(__file__).with_name("short_mode.yaml")


@dataclass(frozen=True)
class ShortSizes:
    """Floors a short run's settings are raised to (a campaign's own values win)."""

    compared_min_duration_ms: int
    compared_min_query_count: dict[Scenario, int]
    power_min_duration_ms: int


@cache
def short_sizes() -> ShortSizes:
    """The sizes of bench/short_mode.yaml."""
    data = yaml.safe_load(SIZES.read_text())
    compared = data["compared"]
    return ShortSizes(
        compared_min_duration_ms=int(compared["min_duration_ms"]),
        compared_min_query_count={Scenario(name): int(n)
                                  for name, n in compared["min_query_count"].items()},
        power_min_duration_ms=int(data["power"]["min_duration_ms"]))
