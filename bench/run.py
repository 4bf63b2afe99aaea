"""What a run is, how it is keyed, and what it leaves behind: the values every layer exchanges.

A run is (host, benchmark, scenario, kind): its `RunId`, the one identity the store's records,
the status matrix, the tree and the flow's messages all use. It executes with settings, one image
and one LoadGen build; the planned run's key (`RunSpec.key`) hashes everything that can change
the result, so a finished run is never repeated and a changed input always runs again. Each
attempt of a run gets its own folder in the run store (`bench.store`), holding the raw logs and a
`run.json` that serialises `RunRecord`; an attempt is named by its `AttemptId`, the planned run's
key and the attempt number, wherever it is (store folder, container, process, run directory).

Inside a benchmark container the run directory of the target is mounted at `RUN_MOUNT`; it holds
`user.conf` (and `audit.config` for a compliance run, and only then), and is the harness's working
directory, because LoadGen looks for `audit.config` in the current directory. The harness writes
LoadGen's logs, and the accuracy script writes `accuracy.txt`, into `RUN_MOUNT/OUTPUT_DIR`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from bench.trace_judge import TelemetrySummary

RUN_MOUNT = "/subrun/run"
OUTPUT_DIR = "output"


class Scenario(StrEnum):
    SINGLE_STREAM = "SingleStream"
    MULTI_STREAM = "MultiStream"
    OFFLINE = "Offline"
    SERVER = "Server"
    INTERACTIVE = "Interactive"  # a LoadGen Server run with the -interactive settings

    @property
    def loadgen(self) -> str:
        """The LoadGen scenario that runs it."""
        return "Server" if self is Scenario.INTERACTIVE else self.value


class RunKind(StrEnum):
    PERFORMANCE = "performance"
    ACCURACY = "accuracy"
    TEST01 = "TEST01"
    TEST04 = "TEST04"
    TEST05 = "TEST05"
    TEST06 = "TEST06"
    TEST07 = "TEST07"
    TEST08 = "TEST08"
    TEST09 = "TEST09"
    POWER = "power"  # a ranging then a testing performance run under the analyzer
    TRAINING = "training"  # one seeded run of a training benchmark (bench.training_campaign)
    TUNING = "tuning"  # one probe of a tuning search (bench.tuning): information, never a result

    @property
    def is_compliance(self) -> bool:
        return self.value.startswith("TEST")

    @property
    def loadgen_mode(self) -> str:
        """The LoadGen test mode the harness is started in."""
        return "AccuracyOnly" if self is RunKind.ACCURACY else "PerformanceOnly"


class RunState(StrEnum):
    """Where a run stands: one vocabulary for run.json, the flow, its events and `subrun status`.

    An attempt is stored running, then ends finished (collected and judged: whether it passed
    is `bench.submitted.passed`), failed (ended before it could be judged), lost (opened but
    never started) or cancelled (stopped with its campaign; it runs again). A planned run with
    no attempt yet is pending, which is never stored."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    LOST = "lost"
    CANCELLED = "cancelled"

    @property
    def ended_unjudged(self) -> bool:
        """Ended without a verdict and so to be run again: lost or cancelled."""
        return self in (RunState.LOST, RunState.CANCELLED)


class Mode(StrEnum):
    SUBMISSION = "submission"  # official durations and counts
    SHORT = "short"  # minutes; every artefact is marked not submittable


Setting = str | int | float


class RunId(NamedTuple):
    """Which run: the same run across its attempts, re-runs with new settings and new images."""

    host: str
    benchmark: str  # the folder under images/ (it decides the model)
    scenario: Scenario
    kind: RunKind
    number: int = 0  # a training run's number in its set (training runs have no scenario)

    def __str__(self) -> str:
        """The label a person reads, unique within a campaign: host/benchmark/scenario/kind,
        or host/benchmark/runNN for a training run."""
        if self.kind is RunKind.TRAINING:
            return f"{self.host}/{self.benchmark}/run{self.number:0>2}"
        return f"{self.host}/{self.benchmark}/{self.scenario.value}/{self.kind.value}"


class AttemptId(NamedTuple):
    """One attempt of a planned run: the planned run's key and the attempt number (from 1)."""

    key: str
    attempt: int

    def name(self, campaign: str, phase: str = "") -> str:
        """The attempt's name on its target: container name and label, process name, run
        directory. It carries the campaign, so two campaigns that plan the same run on one
        host never clash on a name nor remove each other's runs; a power run's passes
        (ranging, testing) run under names of their own."""
        key = f"{self.key}-{phase}" if phase else self.key
        return f"{campaign}-{key}-a{self.attempt}"


class RunSpec(BaseModel):
    """Everything that decides what a run does and what it measures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str
    benchmark: str  # the folder under images/
    model: str  # official model name (closed) or the benchmark it maps to (open)
    scenario: Scenario
    kind: RunKind
    mode: Mode
    round: str  # "v6.1"
    settings: dict[str, Setting] = Field(default_factory=dict)  # user.conf keys for this run
    image_digest: str = ""
    loadgen_version: str = ""

    @property
    def key(self) -> str:
        """The planned run's key in the store: equal specs give equal keys, any change a new
        key. Ask it of a planned spec only: a re-run's spec carries adjusted settings but stays
        under its planned run's key, which its record holds (`RunRecord.key`)."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def run(self) -> RunId:
        """Which run this is, whatever its settings, image and LoadGen build."""
        number = self.settings.get("run", 0) if self.kind is RunKind.TRAINING else 0
        return RunId(self.host, self.benchmark, self.scenario, self.kind, int(number))

    @property
    def label(self) -> str:
        """The run's label (str of its RunId)."""
        return str(self.run)


class Check(BaseModel):
    """One rule applied to a run, and what it found."""

    model_config = ConfigDict(frozen=True)

    name: str
    ok: bool
    detail: str = ""


class Verdict(BaseModel):
    """The judgement of a run on arrival: passed or not, why, and what to do about it."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    checks: list[Check] = Field(default_factory=list)
    reason: str = ""  # plain words, empty when passed
    fix: str = ""  # a suggested remedy, when one is known
    # settings for an automatic re-run (run.json of older stores spells it retry_settings)
    rerun_settings: dict[str, Setting] | None = Field(
        default=None, validation_alias=AliasChoices("rerun_settings", "retry_settings"))
    metrics: dict[str, float] = Field(default_factory=dict)
    submittable: bool = True  # False for short-mode runs


class RunRecord(BaseModel):
    """What `run.json` holds for one attempt of a run."""

    spec: RunSpec  # as it ran: a re-run's settings are adjusted
    key: str  # the planned run's key (its spec's key, before any re-run adjusted the settings)
    attempt: int
    state: RunState  # never PENDING
    started_at: datetime
    finished_at: datetime | None = None
    exit_status: int | None = None
    files: dict[str, str] = Field(default_factory=dict)  # file name -> sha256
    log_tail: str = ""  # last lines of the container/process output
    verdict: Verdict | None = None
    error: str = ""  # why the attempt failed before it could be judged
    # seconds this attempt waited for its host to settle: hosts.yaml settle_s, less what the
    # host had already been idle since its last run ended
    settle_s: float = 0.0
    reverifies: int | None = None  # this attempt re-verifies the logs collected by that attempt
    references: dict[str, int] = Field(default_factory=dict)  # kind -> attempt verified against
    # why a passing performance attempt no longer stands (a lucky measurement; bench.settle)
    withdrawn: str = ""
    telemetry: TelemetrySummary | None = None  # the sampler's trace, judged (bench.trace_judge)

    @property
    def run(self) -> RunId:
        """Which run this is an attempt of."""
        return self.spec.run

    @property
    def id(self) -> AttemptId:
        """Which attempt this is: the store folder, and the name on its target."""
        return AttemptId(self.key, self.attempt)
