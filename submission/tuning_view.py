"""The report's tuning: for each Server (and Interactive) result, the search that chose its
target_qps, drawn as QPS tried against latency with VALID and INVALID marked, and a table of
every search the campaign's runs used (bench.tuning_record)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.tune_search import SERVER_LIKE, probed
from bench.tuning_record import TuningRecord
from submission.plots import SearchTrace, tuning_searches


def figures(records: Sequence[TuningRecord]) -> dict[str, bytes]:
    """`tuning.png`: one panel per Server-like search."""
    traces = []
    for r in records:
        if r.scenario not in SERVER_LIKE:
            continue
        tried = [(q, p) for p in r.probes if (q := probed(p, r.scenario)) and p.latency_ns]
        bound = next((p.latency_bound_ns for p in r.probes if p.latency_bound_ns), None)
        chosen = next(iter(r.chosen.values()), None)
        traces.append(SearchTrace(
            label=f"{_label(r)}: {len(r.probes)} probes, {r.cost_s:.0f} s",
            qps=[q for q, _ in tried], latency_ms=[p.latency_ns / 1e6 for _, p in tried
                                                   if p.latency_ns],
            valid=[p.valid for _, p in tried], confirm=[p.confirm for _, p in tried],
            chosen=float(chosen) if isinstance(chosen, int | float) else None,
            bound_ms=bound / 1e6 if bound else None))
    png = tuning_searches(traces, "Tuning: latency at each target_qps tried")
    return {"tuning.png": png} if png else {}


def section(records: Sequence[TuningRecord]) -> list[str]:
    """The searches whose values the runs took."""
    if not records:
        return []
    out = ["## Tuning", "", "The runs took these values from the tuning record (`subrun tune "
           "--show`); probes are short LoadGen runs, never part of the tree.", "",
           "| search | probes (VALID) | found | chosen | margin | resolution | cost | when |",
           "|---|---|---|---|---|---|---|---|"]
    for r in records:
        chosen = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in r.chosen.items())
        out.append(f"| {_label(r)} | {len(r.probes)} ({sum(p.valid for p in r.probes)}) | "
                   f"{r.found:.4g} | {chosen} | {r.margin:.0%} | "
                   f"{f'{r.resolution:.0%}' if r.resolution else '—'} | {r.cost_s:.0f} s | "
                   f"{r.done_at:%Y-%m-%d %H:%M} |" if r.found and r.done_at else
                   f"| {_label(r)} | {len(r.probes)} | — | — | — | — | {r.cost_s:.0f} s | — |")
    return [*out, ""]


def _label(r: TuningRecord) -> str:
    return f"{r.host}/{r.benchmark}/{r.scenario.value}"
