"""What the planner knows of each host, and where it comes from: tuned, measured, or nothing.

An estimate is only as good as what it rests on, and a person reading a plan must see which
numbers are guesses. In order of trust: the tuning record of the run's exact key (host, benchmark,
scenario, image digest, LoadGen build, round: probes measured on that very image); the run store's
last performance run of that host, benchmark and scenario (of the same image where there is one);
else nothing, and the plan takes the targets at their word (basis `default`). A tuning record of
another image or LoadGen build is stale and never used. Before images are provisioned (`subrun
plan`) the digest is unknown: the newest record of the round is used and the note says so; the
flow estimates again with the real digests before any run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.measured import (
    Basis,
    ImageKey,
    Measured,
    MeasuredKey,
    accuracy_by_image,
    measured_by_image,
)
from bench.overhead import Overhead, overheads_in
from bench.run import RunSpec, Scenario
from bench.store import RunStore
from bench.tuning_record import TuningBook, TuningKey, TuningRecord

NS_PER_S = 1e9
STORE = "store"  # each campaign's run store under the output folder (CampaignPaths.store)


@dataclass(frozen=True)
class Evidence:
    """The figures a plan's estimates may rest on."""

    by_image: Mapping[ImageKey, Measured] = field(default_factory=dict)
    tuning: TuningBook | None = None
    overheads: Mapping[str, Overhead] = field(default_factory=dict)  # host -> measured
    settle_s: Mapping[str, float] = field(default_factory=dict)  # host -> hosts.yaml settle_s
    accuracy: Mapping[ImageKey, Measured] = field(default_factory=dict)  # accuracy runs' rates

    @classmethod
    def of_latest(cls, latest: Mapping[MeasuredKey, Measured]) -> Evidence:
        """Evidence from the latest figures per host x benchmark x scenario (image unknown)."""
        return cls({(*k, m.image_digest): m for k, m in latest.items()})

    def figures(self, spec: RunSpec, scenario: Scenario | None = None) -> Measured | None:
        """How fast the run's host is at its benchmark in a scenario (the run's own by
        default): tuned, else measured, else None."""
        scenario = scenario or spec.scenario
        return self._tuned(spec, scenario) or self._measured(spec, scenario)

    def _tuned(self, spec: RunSpec, scenario: Scenario) -> Measured | None:
        if self.tuning is None:
            return None
        if spec.image_digest:
            key = TuningKey(spec.host, spec.benchmark, scenario, spec.image_digest,
                            spec.loadgen_version, spec.round)
            record = self.tuning.current(key)
            return tuned_figures(record, "") if record else None
        done = [r for r in self.tuning.history(spec.host, spec.benchmark, scenario)
                if r.done and r.round == spec.round]
        if not done:
            return None
        image = done[-1].image_digest.removeprefix("sha256:")[:12]
        return tuned_figures(done[-1], f"; the image digest is unknown at plan time: used if "
                                       f"image {image} is still the one provisioned")

    def accuracy_rate(self, spec: RunSpec) -> Measured | None:
        """The rate the last accuracy run of the host, benchmark and scenario reached (the same
        image's where there is one), or None."""
        return self._measured(spec, spec.scenario, self.accuracy)

    def _measured(self, spec: RunSpec, scenario: Scenario,
                  known: Mapping[ImageKey, Measured] | None = None) -> Measured | None:
        known = self.by_image if known is None else known
        mine = [(k, m) for k, m in known.items()
                if k[:3] == (spec.host, spec.benchmark, scenario)]
        if not mine:
            return None
        same = [m for k, m in mine if spec.image_digest and k[3] == spec.image_digest]
        if same:
            return same[0]
        latest = max((m for _, m in mine), key=lambda m: m.at or datetime.min.replace(tzinfo=UTC))
        why = ("the image digest is unknown at plan time" if not spec.image_digest
               else "no run of this image measured it yet")
        return replace(latest, source=f"{latest.source} ({why})")

    def overhead_s(self, spec: RunSpec) -> float | None:
        """The host's measured overhead per attempt of the run's kind, or None."""
        found = self.overheads.get(spec.host)
        return found.for_kind(spec.kind) if found else None


def tuned_figures(record: TuningRecord, caveat: str) -> Measured:
    """A finished tuning record's probes as figures: the highest rate a VALID probe sustained
    (every probe's if none was VALID) and the latency of the last VALID probe."""
    valid = [p for p in record.probes if p.valid] or record.probes
    rates = [p.samples_per_s for p in valid if p.samples_per_s]
    latencies = [p.latency_ns for p in valid if p.latency_ns]
    chosen = ", ".join(f"{k.rsplit('.', 1)[-1]} {v:g}" if isinstance(v, float) else
                       f"{k.rsplit('.', 1)[-1]} {v}" for k, v in record.chosen.items())
    done = f"{record.done_at:%Y-%m-%d %H:%M}" if record.done_at else "under way"
    source = (f"tuning of {record.key} ({len(record.probes)} probes, {done}"
              f"{'; chose ' + chosen if chosen else ''}){caveat}")
    return Measured(max(rates) if rates else None,
                    latencies[-1] / NS_PER_S if latencies else None, source, Basis.TUNED,
                    record.image_digest)


def gather(output_dir: Path, own_store: Path, settle_s: Mapping[str, float],
           tuning: Path | None = None) -> Evidence:
    """Evidence from every campaign's store under output_dir (this campaign's first), the
    tuning records, and the hosts' settle times."""
    roots = [own_store, *sorted(p for p in Path(output_dir).glob(f"*/{STORE}")
                                if p.resolve() != Path(own_store).resolve())]
    stores = [RunStore(p) for p in roots if p.is_dir()]
    book = TuningBook(tuning) if tuning is not None else None
    return Evidence(measured_by_image(stores), book, overheads_in(stores), dict(settle_s),
                    accuracy_by_image(stores))
