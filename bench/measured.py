"""What the run store has measured of each host x benchmark x scenario, for the planner.

A plan built from the manifest's targets alone is wrong in the way that costs most: an Offline
`target_qps` above what the host reaches makes LoadGen issue 1.1 x target x min_duration samples,
and the run lasts as long as the host needs to process them. The last performance run of the
same host and benchmark knows the real throughput (and per-query latency), so estimates use it;
one of the same image is preferred, since a new image may be faster or slower.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from bench.overhead import accuracy_samples, loadgen_span_s
from bench.run import RunKind, RunRecord, RunState, Scenario
from bench.store import RunStore

NS_PER_S = 1e9


class Basis(StrEnum):
    """What an estimate rests on: a person reads `default` as a guess."""

    TUNED = "tuned"  # the tuning record of the run's host, benchmark, scenario, image, LoadGen
    MEASURED = "measured"  # the store's last performance run of that host and benchmark
    DEFAULT = "default"  # nothing measured: the targets taken at their word


@dataclass(frozen=True)
class Measured:
    """The figures of one finished performance run that decide how long the next one lasts."""

    samples_per_s: float | None  # throughput (Offline, Server)
    latency_s: float | None  # mean latency of one query (SingleStream, MultiStream)
    source: str  # which run measured it, for the plan's notes
    basis: Basis = Basis.MEASURED
    image_digest: str = ""
    at: datetime | None = None  # when the run measured it


MeasuredKey = tuple[str, str, Scenario]  # host, benchmark, scenario
ImageKey = tuple[str, str, Scenario, str]  # host, benchmark, scenario, image digest


def measured_in(store: RunStore) -> dict[MeasuredKey, Measured]:
    """The latest measured figures per host x benchmark x scenario (any mode, any image)."""
    return {key[:3]: m for key, m in _latest(measured_runs([store]), by_image=False).items()}


def measured_by_image(stores: Iterable[RunStore]) -> dict[ImageKey, Measured]:
    """The latest measured figures per host x benchmark x scenario x image digest."""
    return _latest(measured_runs(stores), by_image=True)


def measured_runs(stores: Iterable[RunStore]) -> list[tuple[RunRecord, Measured]]:
    """Every run of the stores that measured something, with its latest such attempt (a later
    crash measured nothing)."""
    found = []
    for store in stores:
        run_keys = store.keys()
        for run_key in run_keys:
            measured = ((r, f) for r in reversed(store.attempts(run_key))
                        if (f := _figures(r)) is not None)
            first = next(measured, None)
            if first is not None:
                found.append(first)
    return found


def accuracy_by_image(stores: Iterable[RunStore]) -> dict[ImageKey, Measured]:
    """The rate of the latest finished accuracy run per host x benchmark x scenario x image:
    an accuracy run logs every response, so it is slower than the performance run's rate."""
    found = []
    for store in stores:
        run_keys = store.keys()
        for run_key in run_keys:
            for record in reversed(store.attempts(run_key)):
                if record.spec.kind is not RunKind.ACCURACY or record.state != RunState.FINISHED:
                    continue
                span_s, samples = loadgen_span_s(record, store), accuracy_samples(record, store)
                if span_s and samples:
                    found.append((record, Measured(
                        samples / span_s, None, f"{record.spec.label} of "
                        f"{record.started_at:%Y-%m-%d %H:%M} ({samples} samples in "
                        f"{span_s:.1f} s)", image_digest=record.spec.image_digest,
                        at=record.started_at)))
                    break
    return _latest(found, by_image=True)


def _latest(runs: list[tuple[RunRecord, Measured]], *, by_image: bool
            ) -> dict[ImageKey, Measured]:
    found: dict[ImageKey, tuple[RunRecord, Measured]] = {}
    for record, figures in runs:
        spec = record.spec
        key = (spec.host, spec.benchmark, spec.scenario, spec.image_digest if by_image else "")
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
    return Measured(samples_per_s=rate, latency_s=latency_ns / NS_PER_S if latency_ns else None,
                    source=source, image_digest=record.spec.image_digest, at=record.started_at)
