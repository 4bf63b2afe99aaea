"""The one reader of power sample logs (spl.txt, the daemon's `-l` log), on PTDaemon's lines."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

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
