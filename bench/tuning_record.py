"""What tuning learned about one host x benchmark x scenario, kept across campaigns.

A target found by hand lives in someone's notes and goes stale without anyone noticing. The
record keeps every probe run (the settings tried, what LoadGen measured, VALID or not, how long
it took), the value chosen from them, the margin taken off for the official run, and when. It is
keyed by what makes a measurement comparable: the host, the benchmark, the scenario, the image
digest, the LoadGen build and the round. A record whose image or LoadGen build differs from the
run about to start is stale: it is shown as such and never used for user.conf.

Layout: `<output_dir>/tuning/<host>/<benchmark>/<scenario>.json` holds the records of that
triple (one per image x LoadGen x round, newest last). Every probe is written as it lands
(atomically), so a tuning killed mid-search continues from the probes already recorded.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from bench.run import Scenario, Setting
from lab.errors import ConfigError

_write_lock = threading.Lock()


class TuningKey(NamedTuple):
    """What makes two measurements comparable."""

    host: str
    benchmark: str
    scenario: Scenario
    image_digest: str
    loadgen_version: str
    round: str

    def __str__(self) -> str:
        image = self.image_digest.removeprefix("sha256:")[:12] or "unknown image"
        return (f"{self.host}/{self.benchmark}/{self.scenario.value} (image {image}, "
                f"LoadGen {self.loadgen_version or '?'}, {self.round})")


class Probe(BaseModel):
    """One short LoadGen run of the search."""

    settings: dict[str, Setting]  # the user.conf keys it ran with
    valid: bool  # LoadGen's result (latency bound and early stopping for Server)
    samples_per_s: float | None = None  # what it sustained (Offline, Server)
    latency_ns: float | None = None  # the percentile the scenario reports (streams, Server)
    mean_latency_ns: float | None = None
    latency_bound_ns: float | None = None  # the round's Server latency bound it was judged by
    duration_s: float  # wall time of the probe, container start to collection
    at: datetime
    attempt: str = ""  # the store folder of the probe's attempt, for the logs
    confirm: bool = False  # a confirmation of the chosen value, as long as the official run


class TuningRecord(BaseModel):
    """The search for one key: its probes, and once done the chosen values."""

    host: str
    benchmark: str
    scenario: Scenario
    image_digest: str
    loadgen_version: str
    round: str
    campaign: str = ""  # the campaign that started the search
    probes: list[Probe] = Field(default_factory=list)
    # the user.conf keys the campaign's runs take (`*.<scenario>.target_qps`, ...), after margin
    chosen: dict[str, Setting] = Field(default_factory=dict)
    found: float | None = None  # the best value the search found, before the margin
    # the share between `found` and `chosen` (0.05 = 5 %), on the side that keeps the official
    # run VALID: a lower Server target_qps, a higher Offline one, a lower stream latency
    margin: float = 0.0
    resolution: float | None = None  # the search stopped when its bracket was this narrow
    done_at: datetime | None = None  # None while the search is under way

    @property
    def key(self) -> TuningKey:
        return TuningKey(self.host, self.benchmark, self.scenario, self.image_digest,
                         self.loadgen_version, self.round)

    @property
    def done(self) -> bool:
        return self.done_at is not None

    @property
    def cost_s(self) -> float:
        """What the search spent on its probes."""
        return sum(p.duration_s for p in self.probes)


_records = TypeAdapter(list[TuningRecord])


class TuningBook:
    """The tuning records in one folder (`CampaignPaths.tuning`), shared by every campaign that
    writes under the same output folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, host: str, benchmark: str, scenario: Scenario) -> Path:
        return self.root / host / benchmark / f"{scenario.value}.json"

    def history(self, host: str, benchmark: str, scenario: Scenario) -> list[TuningRecord]:
        """Every record of the triple, oldest first (any image, LoadGen build or round)."""
        path = self.path(host, benchmark, scenario)
        if not path.is_file():
            return []
        try:
            return _records.validate_json(path.read_bytes())
        except (ValidationError, ValueError) as e:
            raise ConfigError(f"{path}: the tuning record cannot be read ({e}). Move it away "
                              "and tune again (`subrun tune CAMPAIGN`).") from e

    def find(self, key: TuningKey) -> TuningRecord | None:
        """The record of exactly this key (done or under way), or None."""
        return next((r for r in self.history(key.host, key.benchmark, key.scenario)
                     if r.key == key), None)

    def current(self, key: TuningKey) -> TuningRecord | None:
        """The finished record a run with this key may use, or None."""
        found = self.find(key)
        return found if found is not None and found.done else None

    def stale(self, key: TuningKey) -> TuningRecord | None:
        """The newest finished record of the triple that no longer applies to this key (another
        image, LoadGen build or round), to say why it is not used."""
        older = [r for r in self.history(key.host, key.benchmark, key.scenario)
                 if r.done and r.key != key]
        return older[-1] if older else None

    def save(self, record: TuningRecord) -> TuningRecord:
        """Write the record in place of the one with its key (atomically)."""
        with _write_lock:
            others = [r for r in self.history(record.host, record.benchmark, record.scenario)
                      if r.key != record.key]
            path = self.path(record.host, record.benchmark, record.scenario)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(_records.dump_json([*others, record], indent=2))
            os.replace(tmp, path)
        return record

    def begin(self, key: TuningKey, campaign: str = "") -> TuningRecord:
        """Open a fresh search for the key, in place of any record it had."""
        return self.save(TuningRecord(
            host=key.host, benchmark=key.benchmark, scenario=key.scenario,
            image_digest=key.image_digest, loadgen_version=key.loadgen_version,
            round=key.round, campaign=campaign))

    def add_probe(self, key: TuningKey, probe: Probe) -> TuningRecord:
        """Record one probe as it lands (opening the record on the first)."""
        record = self.find(key) or TuningRecord(
            host=key.host, benchmark=key.benchmark, scenario=key.scenario,
            image_digest=key.image_digest, loadgen_version=key.loadgen_version,
            round=key.round)
        return self.save(record.model_copy(update={"probes": [*record.probes, probe]}))

    def finish(self, key: TuningKey, *, chosen: dict[str, Setting], found: float | None,
               margin: float, resolution: float | None = None) -> TuningRecord:
        """Close the search with the values the campaign's runs take."""
        record = self.find(key)
        if record is None:
            raise ConfigError(f"{key}: no tuning under way to finish.")
        return self.save(record.model_copy(update={
            "chosen": chosen, "found": found, "margin": margin, "resolution": resolution,
            "done_at": datetime.now(UTC)}))

    def records(self) -> list[TuningRecord]:
        """Every record under the folder, for `subrun tune --show`."""
        if not self.root.is_dir():
            return []
        found: list[TuningRecord] = []
        for path in sorted(self.root.glob("*/*/*.json")):
            host, benchmark = path.parent.parent.name, path.parent.name
            found += self.history(host, benchmark, Scenario(path.stem))
        return found
