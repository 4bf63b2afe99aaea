"""What a run costs beyond LoadGen's own time on each host, measured from the run store.

A run's wall time is the settle wait, LoadGen's run, and an overhead around it: the container's
start and the harness's start-up, the accuracy scoring, collection into the store, the verdict and
the controller's hand-off to the host's next run. The overhead differs between hosts (a shipped
image, a slow link) and between kinds (an accuracy run scores and collects a large log), so it is
measured per host and kind from the attempts already in the store: each attempt's recorded span
less the span of its LoadGen detail log's timestamps, and the gaps between one attempt's end and
the next one's settle on the same host.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from bench.run import RunKind, RunRecord, RunState
from bench.store import RunStore

DETAIL = "mlperf_log_detail.txt"
TAIL_BYTES = 16384
HEAD_BYTES = 1 << 17  # the settings come after LoadGen's build lines (its git log among them)
TIME_MS = re.compile(rb'"time_ms":\s*([0-9]+(?:\.[0-9]+)?)')
ACCURACY_COUNT = re.compile(rb'"key":\s*"effective_accuracy_sample_count",\s*"value":\s*([0-9]+)')
MAX_GAP_S = 30.0  # a longer gap is another campaign start, not a hand-off
LATEST = 40  # attempts per host read for the figures: recent ones tell the host as it is
SKIPPED = (RunKind.POWER, RunKind.TRAINING)  # wrapped in their own sessions: constants apply


@dataclass(frozen=True)
class Overhead:
    """One host's measured overhead per attempt (seconds), by run kind."""

    by_kind: dict[str, float] = field(default_factory=dict)  # the median of each kind
    handoff_s: float = 0.0  # the median gap from one attempt's end to the next one's settle
    attempts: int = 0  # how many attempts the figures come from

    def for_kind(self, kind: RunKind) -> float | None:
        """The overhead of an attempt of this kind (another non-accuracy kind's when this one
        was never measured), hand-off included; None when nothing was measured."""
        own = self.by_kind.get(kind.value)
        if own is None and kind is not RunKind.ACCURACY:
            others = [v for k, v in self.by_kind.items() if k != RunKind.ACCURACY.value]
            own = statistics.median(others) if others else None
        return None if own is None else own + self.handoff_s


def overheads_in(stores: Iterable[RunStore]) -> dict[str, Overhead]:
    """Each host's overhead from the latest finished attempts in the stores."""
    attempts: dict[str, list[tuple[RunRecord, RunStore]]] = {}
    for store in stores:
        run_keys = store.keys()
        for key in run_keys:
            for record in store.attempts(key):
                if record.finished_at is not None and record.reverifies is None:
                    attempts.setdefault(record.spec.host, []).append((record, store))
    return {host: _overhead(sorted(mine, key=lambda x: x[0].started_at)[-LATEST:])
            for host, mine in attempts.items()}


def _overhead(attempts: list[tuple[RunRecord, RunStore]]) -> Overhead:
    spans: dict[str, list[float]] = {}
    for record, store in attempts:
        if record.state != RunState.FINISHED or record.spec.kind in SKIPPED:
            continue
        loadgen_s = loadgen_span_s(record, store)
        if loadgen_s is None or record.finished_at is None:
            continue
        wall_s = (record.finished_at - record.started_at).total_seconds()
        spans.setdefault(record.spec.kind.value, []).append(max(0.0, wall_s - loadgen_s))
    gaps = [(b.started_at - a.finished_at).total_seconds() - b.settle_s
            for (a, _), (b, _) in itertools.pairwise(attempts)
            if a.finished_at is not None]
    gaps = [g for g in gaps if 0 <= g <= MAX_GAP_S]
    return Overhead({k: statistics.median(v) for k, v in spans.items()},
                    statistics.median(gaps) if gaps else 0.0,
                    sum(len(v) for v in spans.values()))


def loadgen_span_s(record: RunRecord, store: RunStore) -> float | None:
    """LoadGen's own run time: the last timestamp of the attempt's detail log (LoadGen counts
    from its start), read from the file's end only."""
    stamps = [float(m) for m in TIME_MS.findall(_detail_bytes(record, store, tail=True))]
    return max(stamps) / 1000 if stamps else None


def accuracy_samples(record: RunRecord, store: RunStore) -> int | None:
    """How many samples an accuracy run issued (its detail log's effective count, near the
    file's start)."""
    found = ACCURACY_COUNT.search(_detail_bytes(record, store, tail=False))
    return int(found.group(1)) if found and int(found.group(1)) > 0 else None


def _detail_bytes(record: RunRecord, store: RunStore, *, tail: bool) -> bytes:
    names = sorted((n for n in record.files if n.endswith(DETAIL)), key=lambda n: n.count("/"))
    if not names:
        return b""
    path = store.path(record.key, record.attempt) / names[0]
    try:
        with path.open("rb") as f:
            if tail:
                f.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return f.read(TAIL_BYTES if tail else HEAD_BYTES)
    except OSError:
        return b""
