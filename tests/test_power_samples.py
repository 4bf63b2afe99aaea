"""The one reader of power sample logs (spl.txt, the daemon's `-l` log), on PTDaemon's lines,
and the one computation of the checker's power figures from them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.power_metric import LoadgenWindow, average_w, compute_metric
from bench.power_samples import Sample, parse_samples, read_samples
from lab.errors import PowerError
from power import protocol

# as power-dev's server writes spl.txt from PTDaemon's RL replies, with an event line between
SPL = ("Time,12-23-2020 10:21:51.496,Watts,23.430000,Volts,228.370000,Amps,0.102000,PF,0.980000,"
       "Mark,s1_testing\n"
       "Time,12-23-2020 10:21:52.496,NOTICE,analyzer range changed\n"
       "Time,12-23-2020 10:21:52.497,Watts,-1.000000,Volts,0.000000,Amps,0.000000,PF,0.000000,"
       "Mark,s1_testing\n\n")


def test_sample_lines_are_read_in_order_and_other_lines_skipped(tmp_path: Path) -> None:
    samples = parse_samples(SPL)
    assert [s.watts for s in samples] == [23.43, -1.0]  # the metric, not the reader, drops <= 0
    assert samples[0] == Sample(datetime(2020, 12, 23, 10, 21, 51, 496000, tzinfo=UTC),
                                23.43, 228.37, 0.102, 0.98)
    (tmp_path / "spl.txt").write_text(SPL)
    assert read_samples(tmp_path / "spl.txt") == samples
    assert protocol.Sample is Sample  # RL replies are the same lines: one format
    line = samples[0].log_line("s1_testing")
    assert line == SPL.splitlines()[0] and parse_samples(line) == samples[:1]


def test_a_missing_sample_log_names_its_path(tmp_path: Path) -> None:
    with pytest.raises(PowerError, match=r"spl\.txt: cannot read the power sample log"):
        read_samples(tmp_path / "run_1" / "spl.txt")


def test_the_checkers_figures_strictly_inside_the_window_with_positive_watts() -> None:
    """One computation for the power verdicts and the report: the checker's average (samples
    strictly inside power_begin..power_end, watts > 0) and energy per query for SingleStream."""
    start = datetime(2026, 1, 5, 2, 0, 0, tzinfo=UTC)
    samples = [Sample(start + timedelta(seconds=i), w, 230.0, 0.5, 0.9)
               for i, w in enumerate((500.0, 100.0, 0.0, 120.0, 140.0, 900.0))]
    window = LoadgenWindow(start, start + timedelta(seconds=5), "SingleStream", 40)
    assert average_w(samples, window) == 120.0  # not the samples on the edges, not 0 W
    measured = compute_metric(samples, window, "spl.txt")
    assert (measured.avg_power_w, measured.samples_in_window) == (120.0, 3)
    assert measured.energy_per_query_mj == 120.0 * 5 * 1000 / 40
    offline = compute_metric(samples, LoadgenWindow(window.power_begin, window.power_end,
                                                    "Offline", 40), "spl.txt")
    assert offline.energy_per_query_mj is None and offline.headline == "120.00 W"
    empty = LoadgenWindow(start + timedelta(seconds=10), start + timedelta(seconds=20),
                          "Offline", 1)
    assert average_w(samples, empty) is None
    with pytest.raises(PowerError, match=r"spl\.txt has no power samples inside"):
        compute_metric(samples, empty, "spl.txt")
