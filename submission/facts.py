"""What the report shows about results and runs, read from the tree and the run store.

Headline metrics are the ones the checker reports (performance_check.py RESULT_FIELD): Offline
samples/s, SingleStream and MultiStream early-stopping latency in ms, Server and Interactive
completed samples/s. Power and energy per query are the checker's figures, computed where the
power runs' verdicts compute them (`bench.power_metric`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.loadgen_log import DetailLog, read_detail
from bench.power_metric import compute_metric, loadgen_window
from bench.power_samples import read_samples
from bench.run import RunKind
from bench.submitted import standing
from lab.errors import PowerError, RunError
from submission.index import PlacedResult
from submission.inputs import StoredRun
from submission.layout import ACCURACY_TXT, DETAIL, SPL, Layout, ResultKey
from submission.plots import PowerTrace

HEADLINE = {"Offline": ("result_samples_per_second", 1.0, "samples/s"),
            "Server": ("result_completed_samples_per_sec", 1.0, "samples/s"),
            "Interactive": ("result_completed_samples_per_sec", 1.0, "samples/s"),
            "SingleStream": ("early_stopping_latency_ss", 1e-6, "ms"),
            "MultiStream": ("early_stopping_latency_ms", 1e-6, "ms")}
PERCENTILES = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)


@dataclass
class ResultFacts:
    """One placed result's numbers."""

    placed: PlacedResult
    metric: float | None = None
    unit: str = ""
    validity: str = ""
    accuracy: str = ""
    latency_ms: dict[float, float] = field(default_factory=dict)
    power_w: float | None = None
    energy_mj: float | None = None
    traces: list[PowerTrace] = field(default_factory=list)


@dataclass(frozen=True)
class RunCell:
    """The standing attempt of one run kind of a result (bench.submitted; the latest when none
    passed), and how many attempts there were."""

    run: StoredRun
    attempts: int


def result_facts(layout: Layout, placed: PlacedResult, runs: Sequence[StoredRun]) -> ResultFacts:
    """Metrics, accuracy line and power of a result, from its folders in the tree."""
    key = ResultKey(placed.system, placed.model_dir, placed.scenario)
    facts = ResultFacts(placed)
    detail = _detail(layout.run_1(key) / DETAIL)
    if detail is not None:
        name, scale, facts.unit = HEADLINE.get(placed.scenario, HEADLINE["Offline"])
        value = detail.get(name)
        facts.metric = float(value) * scale if isinstance(value, int | float) else None
        facts.validity = str(detail.get("result_validity", ""))
        facts.latency_ms = _percentiles(detail)
    accuracy = layout.accuracy_dir(key) / ACCURACY_TXT
    if accuracy.is_file():
        facts.accuracy = next((line for line in accuracy.read_text().splitlines()
                               if line.strip() and not line.startswith("hash=")), "")
    power_ref = placed.runs.get(RunKind.POWER.value)
    power_run = next((r for r in runs if power_ref and str(r.folder) == power_ref.folder), None)
    if power_run is not None:
        _power(facts, power_run)
    return facts


def matrix(runs: Iterable[StoredRun]) -> dict[tuple[str, str, str], dict[RunKind, RunCell]]:
    """(host, benchmark, scenario) -> kind -> standing attempt (else the latest) and attempts."""
    table: dict[tuple[str, str, str], dict[RunKind, RunCell]] = {}
    grouped: dict[tuple[object, ...], list[StoredRun]] = {}
    for run in runs:
        grouped.setdefault(run.spec.run, []).append(run)
    for attempts in grouped.values():
        chosen = standing(r.record for r in attempts)
        latest = next((r for r in attempts if r.record is chosen), None) or max(
            attempts, key=lambda r: (r.record.started_at.isoformat(), r.record.attempt))
        spec = latest.spec
        row = table.setdefault((spec.host, spec.benchmark, spec.scenario.value), {})
        row[spec.kind] = RunCell(latest, len(attempts))
    return dict(sorted(table.items()))


def _detail(path: Path) -> DetailLog | None:
    try:
        return read_detail(path) if path.is_file() else None
    except RunError:
        return None


def _percentiles(detail: DetailLog) -> dict[float, float]:
    found = {}
    for p in PERCENTILES:
        value = detail.get(f"result_{p:.2f}_percentile_latency_ns")
        if isinstance(value, int | float):
            found[p] = value / 1e6
    return found


def _power(facts: ResultFacts, run: StoredRun) -> None:
    for phase in ("ranging", "run_1"):
        spl, detail_path = run.file(f"{phase}/{SPL}"), run.file(f"{phase}/{DETAIL}")
        detail = _detail(detail_path) if detail_path else None
        if spl is None:
            continue
        samples = read_samples(spl)
        facts.traces.append(PowerTrace(f"{facts.placed.result} {phase}",
                                       [s.time for s in samples], [s.watts for s in samples],
                                       detail.power_begin if detail else None,
                                       detail.power_end if detail else None))
        if phase == "run_1" and detail is not None:
            try:
                measured = compute_metric(samples, loadgen_window(detail), str(spl))
            except PowerError:
                continue  # no power window, or no sample inside it: the report shows no power
            facts.power_w, facts.energy_mj = measured.avg_power_w, measured.energy_per_query_mj
