"""The power figures of a run, computed the way the submission checker computes them, once:
the power runs' verdicts (`power/`) and the report (`submission/facts.py`) both ask here.

Average watts over the samples strictly inside LoadGen's power_begin..power_end window with
positive watts; for SingleStream and MultiStream, energy per query in millijoules as
avg W x window duration x 1000 / result_query_count. Pure functions over the values of the
logs' one readers (`bench.loadgen_log`, `bench.power_samples`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.loadgen_log import DetailLog, read_detail
from bench.power_samples import Sample
from lab.errors import PowerError

ENERGY_SCENARIOS = ("SingleStream", "MultiStream")
TESTING_DROP_LIMIT = -0.05  # the checker fails testing power more than 5 % below ranging


@dataclass(frozen=True)
class LoadgenWindow:
    """What the power figures need from a LoadGen detail log."""

    power_begin: datetime
    power_end: datetime
    scenario: str
    result_query_count: int

    @property
    def duration_s(self) -> float:
        return (self.power_end - self.power_begin).total_seconds()


@dataclass(frozen=True)
class PowerMetric:
    """The power result of one LoadGen run."""

    avg_power_w: float
    duration_s: float
    samples_in_window: int
    energy_per_query_mj: float | None  # SingleStream and MultiStream only

    @property
    def headline(self) -> str:
        """The figure the checker reports for this scenario, with its unit."""
        if self.energy_per_query_mj is not None:
            return f"{self.energy_per_query_mj:.3f} mJ/query"
        return f"{self.avg_power_w:.2f} W"


def loadgen_window(detail: DetailLog) -> LoadgenWindow:
    """power_begin, power_end, scenario and query count of a LoadGen detail log."""
    begin, end = detail.power_begin, detail.power_end
    missing = [k for k, v in (("power_begin", begin), ("power_end", end)) if v is None]
    if begin is None or end is None:
        raise PowerError(f"{detail.source} has no readable {' or '.join(missing)}: it is not "
                         "the detail log of a finished LoadGen performance run.")
    try:
        queries = int(str(detail.get("result_query_count", 0)))
    except ValueError as e:
        raise PowerError(f"{detail.source} has an unreadable result_query_count: {e}.") from e
    return LoadgenWindow(begin, end, str(detail.get("effective_scenario", "")), queries)


def read_window(path: Path) -> LoadgenWindow:
    """LoadGen's power window from a mlperf_log_detail.txt file."""
    return loadgen_window(read_detail(path))


def in_window(samples: list[Sample], window: LoadgenWindow) -> list[Sample]:
    """The samples strictly inside the window with positive watts (the checker's rule)."""
    return [s for s in samples
            if window.power_begin < s.time < window.power_end and s.watts > 0]


def average_w(samples: list[Sample], window: LoadgenWindow) -> float | None:
    """The checker's average power over the window, or None when no sample is inside it."""
    inside = in_window(samples, window)
    return _mean_w(inside) if inside else None


def compute_metric(samples: list[Sample], window: LoadgenWindow, where: str) -> PowerMetric:
    """Average power (and energy per query for SingleStream/MultiStream) inside the window."""
    inside = in_window(samples, window)
    if not inside:
        raise PowerError(f"{where} has no power samples inside LoadGen's power_begin.."
                         f"power_end window ({window.duration_s:.1f} s); the run must last "
                         "several sample intervals: raise min_duration.")
    avg_w = _mean_w(inside)
    energy = None
    if window.scenario in ENERGY_SCENARIOS and window.result_query_count > 0:
        energy = avg_w * window.duration_s * 1000 / window.result_query_count
    return PowerMetric(avg_w, window.duration_s, len(inside), energy)


def _mean_w(inside: list[Sample]) -> float:
    return sum(s.watts for s in inside) / len(inside)


def ranging_maxima(samples: list[Sample], where: str) -> tuple[float, float]:
    """(max volts, max amps) of a ranging measurement, for the testing ranges."""
    valid = [s for s in samples if s.volts > 0 and s.amps > 0]
    if not valid:
        raise PowerError(f"The ranging measurement of {where} produced no valid samples; the "
                         "ranging run ended too fast or the analyzer read nothing.")
    return max(s.volts for s in valid), max(s.amps for s in valid)


def testing_drop(ranging_w: float, testing_w: float) -> float:
    """Relative change of testing average power against ranging (the checker's delta)."""
    return (testing_w - ranging_w) / ranging_w if ranging_w else 0.0
