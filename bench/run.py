"""What a run is, how it is keyed, and what it leaves behind: the values every layer exchanges.

A run is (host, benchmark, scenario, kind, settings) executed with one image and one LoadGen
build. Its key hashes everything that can change the result, so a finished run is never repeated
and a changed input always runs again. Each attempt of a run gets its own folder in the run store
(`bench.store`), holding the raw logs and a `run.json` that serialises `RunRecord`.

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
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bench.trace import TelemetrySummary

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

    @property
    def is_compliance(self) -> bool:
        return self.value.startswith("TEST")

    @property
    def loadgen_mode(self) -> str:
        """The LoadGen test mode the harness is started in."""
        return "AccuracyOnly" if self is RunKind.ACCURACY else "PerformanceOnly"


class Mode(StrEnum):
    SUBMISSION = "submission"  # official durations and counts
    SHORT = "short"  # minutes; every artefact is marked not submittable


Setting = str | int | float


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
        """Stable identity of the run: equal specs give equal keys, any change a new key."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """A name a person can read, unique within a campaign."""
        return f"{self.host}/{self.benchmark}/{self.scenario.value}/{self.kind.value}"


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
    retry_settings: dict[str, Setting] | None = None  # settings for an automatic re-run
    metrics: dict[str, float] = Field(default_factory=dict)
    submittable: bool = True  # False for short-mode runs


class RunRecord(BaseModel):
    """What `run.json` holds for one attempt of a run."""

    spec: RunSpec
    key: str
    attempt: int
    state: Literal["running", "finished", "failed", "lost", "cancelled"]
    started_at: datetime
    finished_at: datetime | None = None
    exit_status: int | None = None
    files: dict[str, str] = Field(default_factory=dict)  # file name -> sha256
    log_tail: str = ""  # last lines of the container/process output
    verdict: Verdict | None = None
    error: str = ""  # why the attempt failed before it could be judged
    settle_s: float = 0.0  # seconds the host was left idle before this attempt started
    reverifies: int | None = None  # this attempt re-verifies the logs collected by that attempt
    references: dict[str, int] = Field(default_factory=dict)  # kind -> attempt verified against
    telemetry: TelemetrySummary | None = None  # the sampler's trace, judged (bench.trace)
