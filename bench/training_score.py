"""MLPerf Training scoring: how many runs a benchmark needs, the olympic score, and which N of
M > N runs are submitted.

The run count is `mlperf_logging.benchmark_meta`'s (the package checker refuses any other), never
a copy. The olympic score follows the Training rules (section 12): drop the fastest and the
slowest run (the 4 fastest and 4 slowest for unet3d), average the rest; a run that did not
converge counts as infinitely slow, so one such run is the one dropped, and a set with more than
the dropped number of them has no valid score. With M > N runs, the runs are sorted by launch
time, every window of N consecutive runs is olympic-scored (an invalid window scores infinity),
and the window with the median score is submitted; if that window is invalid, so is the result.
`result_summarizer` computes the same score from a package; the lab test compares the two.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts

from lab.errors import ConfigError

FAILED = math.inf  # the time of a run that did not converge or failed its checks
SEED_LIMIT = 2**31 - 1  # seeds fit a signed 32-bit integer: every framework's RNG takes them


def required_runs(benchmark: str, ruleset: str, usage: str = "training") -> int:
    """The number of result files the package checker requires for benchmark under ruleset."""
    try:
        allowed = get_allowed_benchmarks(usage, ruleset)
    except ValueError as e:
        raise ConfigError(f"mlperf-logging does not know ruleset '{ruleset}' for {usage} ({e}); "
                          "use one it lists, e.g. 6.0.0.") from e
    if benchmark not in allowed:
        raise ConfigError(f"Benchmark '{benchmark}' is not part of the {usage} ruleset "
                          f"{ruleset}; it has {', '.join(sorted(set(allowed)))}.")
    return get_result_file_counts(usage)[benchmark]


def dropped_per_side(benchmark: str) -> int:
    """Runs dropped at each end by olympic scoring (rules section 12)."""
    return 4 if benchmark == "unet3d" else 1


def olympic_score(times: Sequence[float], benchmark: str) -> float:
    """The olympic mean of times (math.inf for a failed run); math.inf when more runs failed
    than olympic scoring may drop, or when nothing is left to average."""
    drop = dropped_per_side(benchmark)
    ordered = sorted(times)
    if sum(math.isinf(t) for t in ordered) > drop:
        return FAILED
    kept = ordered[drop:len(ordered) - drop]
    return sum(kept) / len(kept) if kept else FAILED


@dataclass(frozen=True)
class TimedRun:
    """One run as scoring sees it: when it was launched and how long it took to train."""

    run_id: str
    launched_at: datetime
    time_to_train: float  # any unit, the same for all runs; math.inf when it failed


@dataclass(frozen=True)
class Selection:
    """The runs submitted out of M, and why."""

    runs: tuple[TimedRun, ...]  # the N consecutive runs submitted, in launch order
    score: float  # their olympic score; math.inf: the result is invalid
    window_scores: tuple[float, ...]  # every window's score, in launch order

    @property
    def valid(self) -> bool:
        return not math.isinf(self.score)


def select_runs(runs: Sequence[TimedRun], n: int, benchmark: str) -> Selection:
    """The median window of n consecutive runs (by launch time) out of runs (rules section
    12.1); with exactly n runs, all of them."""
    if len(runs) < n:
        raise ValueError(f"{len(runs)} runs cannot fill a set of {n}")
    ordered = sorted(runs, key=lambda r: (r.launched_at, r.run_id))
    windows = [ordered[i:i + n] for i in range(len(ordered) - n + 1)]
    scores = [olympic_score([r.time_to_train for r in w], benchmark) for w in windows]
    # of an even count of windows the slower middle one is taken: the rules forbid choosing
    # for speed, so the ambiguity is settled against the submitter, deterministically
    rank = sorted(range(len(windows)), key=lambda i: (scores[i], i))
    median = rank[len(windows) // 2]
    return Selection(tuple(windows[median]), scores[median], tuple(scores))


def draw_seeds(count: int, taken: Sequence[int] = ()) -> list[int]:
    """count distinct seeds, none of them in taken, from the operating system's randomness."""
    seeds: list[int] = []
    used = set(taken)
    while len(seeds) < count:
        seed = secrets.randbelow(SEED_LIMIT) + 1
        if seed not in used:
            used.add(seed)
            seeds.append(seed)
    return seeds
