"""Nightly history: every judged run in SQLite, trends as plots, and regression alerts.

A nightly campaign appends its runs; a regression is the newest value of a series being worse
than the median of the previous ones by more than a threshold (lower throughput, higher latency
or higher power).
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.run import RunRecord

# Verdict metric names (bench.checks.metrics), best first, with whether larger is better.
HEADLINE_KEYS: tuple[tuple[str, bool], ...] = (
    ("samples_per_second", True),
    ("completed_samples_per_second", True),
    ("tokens_per_second", True),
    ("completed_tokens_per_second", True),
    ("early_stopping_latency_ns", False),
    ("p99_latency_ns", False),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    recorded_at TEXT NOT NULL, campaign TEXT NOT NULL, host TEXT NOT NULL,
    benchmark TEXT NOT NULL, scenario TEXT NOT NULL, kind TEXT NOT NULL, mode TEXT NOT NULL,
    run_key TEXT NOT NULL, passed INTEGER NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL,
    higher_is_better INTEGER NOT NULL
)
"""


@dataclass(frozen=True)
class Point:
    recorded_at: datetime
    value: float


@dataclass(frozen=True)
class Series:
    """One metric of one host x benchmark x scenario over time."""

    host: str
    benchmark: str
    scenario: str
    metric: str
    higher_is_better: bool
    points: tuple[Point, ...]

    @property
    def title(self) -> str:
        return f"{self.host} {self.benchmark} {self.scenario}: {self.metric}"


@dataclass(frozen=True)
class Regression:
    series: Series
    baseline: float
    latest: float

    @property
    def change_pct(self) -> float:
        return (self.latest - self.baseline) / self.baseline * 100 if self.baseline else 0.0

    def describe(self) -> str:
        """One line for a report or an alert."""
        return (f"{self.series.title} moved {self.change_pct:+.1f}% "
                f"({self.baseline:.4g} -> {self.latest:.4g}) against the median of earlier runs")


def headline(metrics: dict[str, float]) -> tuple[str, float, bool] | None:
    """The metric that stands for a run (throughput or latency), with its direction."""
    for key, higher in HEADLINE_KEYS:
        if key in metrics:
            return key, metrics[key], higher
    return None


def record(db: Path, campaign: str, records: Iterable[RunRecord],
           when: datetime | None = None) -> int:
    """Append the judged performance runs of a campaign; returns how many rows were written."""
    when = when or datetime.now(UTC)
    rows = []
    for rec in records:
        if rec.verdict is None or rec.spec.kind.value not in ("performance", "power"):
            continue
        base = (when.isoformat(), campaign, rec.spec.host, rec.spec.benchmark,
                rec.spec.scenario.value, rec.spec.kind.value, rec.spec.mode.value, rec.key,
                int(rec.verdict.passed))
        found = headline(rec.verdict.metrics)
        if found is not None and rec.spec.kind.value == "performance":
            metric, value, higher = found
            rows.append((*base, metric, value, int(higher)))
        for key in ("power_w", "energy_per_query_mj"):
            if key in rec.verdict.metrics:
                rows.append((*base, key, rec.verdict.metrics[key], 0))
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute(_SCHEMA)
        conn.executemany("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    return len(rows)


def record_training(db: Path, campaign: str, mode: str, scores: dict[tuple[str, str], float],
                    when: datetime | None = None) -> int:
    """Append each system's olympic time to train (minutes, lower is better) of a training
    campaign, as the series host x benchmark x "training"; returns how many rows were written."""
    stamp = (when or datetime.now(UTC)).isoformat()
    rows = [(stamp, campaign, host, bench, "training", "training", mode, "", 1,
             "time_to_train_min", minutes, 0)
            for (host, bench), minutes in sorted(scores.items())]
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        conn.execute(_SCHEMA)
        conn.executemany("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    return len(rows)


def series(db: Path) -> list[Series]:
    """Every series in the history, points oldest first (passing runs only)."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        conn.execute(_SCHEMA)
        rows = conn.execute(
            "SELECT host, benchmark, scenario, metric, higher_is_better, recorded_at, value "
            "FROM results WHERE passed = 1 ORDER BY recorded_at"
        ).fetchall()
    grouped: dict[tuple[str, str, str, str, bool], list[Point]] = {}
    for host, bench, scen, metric, higher, at, value in rows:
        grouped.setdefault((host, bench, scen, metric, bool(higher)), []).append(
            Point(datetime.fromisoformat(at), value))
    return [Series(*key, tuple(points)) for key, points in sorted(grouped.items())]


def regressions(db: Path, *, threshold_pct: float = 5.0, window: int = 7) -> list[Regression]:
    """Series whose newest point is worse than the median of up to `window` earlier points."""
    found = []
    for s in series(db):
        if len(s.points) < 2:
            continue
        baseline = statistics.median(p.value for p in s.points[-window - 1:-1])
        latest = s.points[-1].value
        worse = latest < baseline if s.higher_is_better else latest > baseline
        regression = Regression(s, baseline, latest)
        if worse and abs(regression.change_pct) > threshold_pct:
            found.append(regression)
    return found


def plot_trends(db: Path, out_dir: Path) -> list[Path]:
    """One PNG per series, newest point marked; returns the files written."""
    import matplotlib
    import matplotlib.dates

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for s in series(db):
        fig, ax = plt.subplots(figsize=(7, 3))
        times = matplotlib.dates.date2num([p.recorded_at for p in s.points])
        ax.plot(times, [p.value for p in s.points], marker="o")
        ax.xaxis_date()
        ax.set_title(s.title, fontsize=9)
        ax.set_ylabel(s.metric + (" (higher is better)" if s.higher_is_better else ""),
                      fontsize=8)
        fig.autofmt_xdate()
        name = "_".join((s.host, s.benchmark, s.scenario, s.metric)).replace("/", "-")
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
