"""The power figures of a run, computed the way the submission checker computes them.

Average watts over the samples strictly inside LoadGen's power_begin..power_end window with
positive watts; for SingleStream and MultiStream, energy per query in millijoules as
avg W x window duration x 1000 / result_query_count. Pure functions over log text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from lab.errors import PowerError
from power import protocol
from power.protocol import Sample

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


def read_window(detail_text: str, where: str) -> LoadgenWindow:
    """power_begin, power_end, scenario and query count from mlperf_log_detail.txt text."""
    values: dict[str, object] = {}
    for line in detail_text.splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        try:
            entry = json.loads(line[len(":::MLLOG "):])
        except json.JSONDecodeError:
            continue
        if entry.get("key") in ("power_begin", "power_end", "effective_scenario",
                                "result_query_count"):
            values[entry["key"]] = entry.get("value")
    missing = [k for k in ("power_begin", "power_end") if k not in values]
    if missing:
        raise PowerError(f"{where} has no {' or '.join(missing)}: it is not the detail log of a "
                         "finished LoadGen performance run.")
    try:
        return LoadgenWindow(protocol.parse_time(str(values["power_begin"])),
                             protocol.parse_time(str(values["power_end"])),
                             str(values.get("effective_scenario", "")),
                             int(str(values.get("result_query_count", 0))))
    except ValueError as e:
        raise PowerError(f"{where} has an unreadable power_begin/power_end: {e}.") from e


def parse_spl(text: str) -> list[Sample]:
    """The samples of an spl.txt (or `-l` log) text, in order."""
    samples = []
    for line in text.splitlines():
        parsed = protocol.parse_sample_line(line)
        if parsed is not None:
            samples.append(parsed[0])
    return samples


def in_window(samples: list[Sample], window: LoadgenWindow) -> list[Sample]:
    """The samples strictly inside the window with positive watts (the checker's rule)."""
    return [s for s in samples
            if window.power_begin < s.time < window.power_end and s.watts > 0]


def compute_metric(samples: list[Sample], window: LoadgenWindow, where: str) -> PowerMetric:
    """Average power (and energy per query for SingleStream/MultiStream) inside the window."""
    inside = in_window(samples, window)
    if not inside:
        raise PowerError(f"{where} has no power samples inside LoadGen's power_begin.."
                         f"power_end window ({window.duration_s:.1f} s); the run must last "
                         "several sample intervals: raise min_duration.")
    avg_w = sum(s.watts for s in inside) / len(inside)
    energy = None
    if window.scenario in ENERGY_SCENARIOS and window.result_query_count > 0:
        energy = avg_w * window.duration_s * 1000 / window.result_query_count
    return PowerMetric(avg_w, window.duration_s, len(inside), energy)


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
