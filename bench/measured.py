"""What the run store has measured of each host x benchmark x scenario, for the planner.

A plan built from the manifest's targets alone is wrong in the way that costs most: an Offline
`target_qps` above what the host reaches makes LoadGen issue 1.1 x target x min_duration samples,
and the run lasts as long as the host needs to process them. The last performance run of the
same host and benchmark knows the real throughput (and per-query latency), so estimates use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.run import RunKind, RunRecord, RunState, Scenario
from bench.store import RunStore

NS_PER_S = 1e9


@dataclass(frozen=True)
class Measured:
    """The figures of one finished performance run that decide how long the next one lasts."""

    samples_per_s: float | None  # throughput (Offline, Server)
    latency_s: float | None  # mean latency of one query (SingleStream, MultiStream)
    source: str  # which run measured it, for the plan's notes


MeasuredKey = tuple[str, str, Scenario]  # host, benchmark, scenario


def measured_in(store: RunStore) -> dict[MeasuredKey, Measured]:
    """The latest measured figures per host x benchmark x scenario (any mode, any image)."""
    found: dict[MeasuredKey, tuple[RunRecord, Measured]] = {}
    run_keys = store.keys()
    for run_key in run_keys:
        # the latest attempt that measured something: a later crash measured nothing
        measured = ((r, f) for r in reversed(store.attempts(run_key))
                    if (f := _figures(r)) is not None)
        record, figures = next(measured, (None, None))
        if record is None or figures is None:
            continue
        key = (record.spec.host, record.spec.benchmark, record.spec.scenario)
        if key not in found or record.started_at > found[key][0].started_at:
            found[key] = (record, figures)
    return {key: measured for key, (_, measured) in found.items()}


def _figures(record: RunRecord) -> Measured | None:
    if record.spec.kind is not RunKind.PERFORMANCE or record.state != RunState.FINISHED \
            or record.verdict is None:
        return None
    metrics = record.verdict.metrics
    rate = metrics.get("samples_per_second")
    latency_ns = metrics.get("mean_latency_ns")
    if rate is None and latency_ns is None:
        return None
    image = record.spec.image_digest.removeprefix("sha256:")[:12] or "unknown image"
    source = (f"{record.spec.label} of {record.started_at:%Y-%m-%d %H:%M} "
              f"({record.spec.mode.value} mode, image {image})")
    return Measured(samples_per_s=rate,
                    latency_s=latency_ns / NS_PER_S if latency_ns else None, source=source)
