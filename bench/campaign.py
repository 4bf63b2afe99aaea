"""A campaign: which hosts run which benchmarks and scenarios, under which round and mode.

The same model is the campaign YAML file a person writes and the parameters of the Prefect flow,
so `subrun run campaign.yaml` and `prefect deployment run submission/full` validate alike.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bench.loadgen_keys import key_problem
from bench.manifest import ComplianceDerate
from bench.run import Mode, Scenario, Setting
from bench.settings import KEY_PATTERN
from lab.config import DEFAULT_INVENTORY
from lab.names import FolderName
from lab.yamlfile import load_model

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
DEFAULT_OUTPUT = Path("out")
HISTORY_FILE = "history.sqlite"


@dataclass(frozen=True)
class CampaignPaths:
    """Every path a campaign writes: its own under `<output_dir>/<name>/`, and beside them what
    campaigns share (the nightly history and its trend plots). Steps, the CLI and tests ask
    this object, so the layout of `out/` is decided here and nowhere else."""

    output_dir: Path
    name: str

    @property
    def root(self) -> Path:
        return self.output_dir / self.name

    @property
    def store(self) -> Path:
        """The run store (shared by resumed runs of the campaign)."""
        return self.root / "store"

    @property
    def tree(self) -> Path:
        """The submission tree."""
        return self.root / "submission"

    @property
    def systems(self) -> Path:
        """The system descriptions captured from the hosts."""
        return self.root / "systems"

    @property
    def checker(self) -> Path:
        """The official checker's working folder."""
        return self.root / "checker"

    @property
    def tarball(self) -> Path:
        return self.root / "submission.tar.gz"

    @property
    def report(self) -> Path:
        """report.md and report.html."""
        return self.root / "report"

    @property
    def package(self) -> Path:
        """A training campaign's package (the layout mlperf-logging's package checker reads)."""
        return self.root / "package"

    @property
    def package_checks(self) -> Path:
        """Where mlperf-logging's checkers of a training package work and log."""
        return self.root / "package-checks"

    @property
    def plan(self) -> Path:
        """The estimates the campaign ran with (bench.plan_record), for the report's estimate
        vs actual."""
        return self.root / "plan.json"

    @property
    def tuning(self) -> Path:
        """What tuning learned (bench.tuning_record.TuningBook), shared by every campaign that
        writes under output_dir."""
        return self.output_dir / "tuning"

    @property
    def history(self) -> Path:
        """The nightly history every campaign under output_dir appends to."""
        return self.output_dir / HISTORY_FILE

    @property
    def trends(self) -> Path:
        """The trend plots drawn from the history."""
        return self.output_dir / "trends"


def _loadgen_values(conf: object) -> object:
    """Each key a LoadGen setting and each value one LoadGen can take, seen as written (before
    pydantic would turn `true` into 1)."""
    if not isinstance(conf, dict):
        return conf  # the dict validation that follows says what is wrong
    problems = []
    for key, value in conf.items():
        if not isinstance(key, str):
            problems.append(f"{key!r} is not a LoadGen key (a name such as 'target_qps')")
        elif "." in key and not KEY_PATTERN.fullmatch(key):
            problems.append(f"{key!r} is not a LoadGen key (a name such as 'target_qps', or "
                            "'model.scenario.name')")
        elif problem := key_problem(key.rsplit(".", 1)[-1], value):
            problems.append(problem)
    if problems:
        raise ValueError("; ".join(problems))
    return conf


# LoadGen user.conf keys without the model.scenario prefix, each checked against what LoadGen
# does with its value
UserConf = Annotated[dict[str, Setting], BeforeValidator(_loadgen_values)]


def _once(items: list[Any], what: str) -> list[Any]:
    twice = sorted(str(i) for i, n in Counter(items).items() if n > 1)
    if twice:
        raise ValueError(f"{what} {', '.join(twice)} listed more than once; list each once")
    return items


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BenchmarkPlan(Strict):
    """One benchmark on one host: its scenarios and per-scenario LoadGen settings."""

    benchmark: Name  # a folder under images/
    # default: every scenario the manifest supports
    scenarios: Annotated[list[Scenario], Field(min_length=1)] | None = None
    settings: dict[Scenario, UserConf] = Field(default_factory=dict)
    # training: M runs (default: the ruleset's N; M > N submits the rules' median window)
    runs: Annotated[StrictInt, Field(ge=1, le=1000)] | None = None

    @field_validator("scenarios")
    @classmethod
    def _scenarios_once(cls, scenarios: list[Scenario] | None) -> list[Scenario] | None:
        if scenarios is not None:
            _once([s.value for s in scenarios], "scenario")
        return scenarios


class HostPlan(Strict):
    """What one host of the inventory runs."""

    host: Name
    benchmarks: list[BenchmarkPlan] = Field(min_length=1)

    @field_validator("benchmarks")
    @classmethod
    def _benchmarks_once(cls, benchmarks: list[BenchmarkPlan]) -> list[BenchmarkPlan]:
        _once([b.benchmark for b in benchmarks], "benchmark")
        return benchmarks


class Campaign(Strict):
    """Everything that decides a campaign; unset fields take the defaults a submitter expects."""

    name: Name = "campaign"
    kind: Literal["inference", "training"] = "inference"  # training: bench.training_campaign
    inventory: Path = DEFAULT_INVENTORY
    round: str = "v6.1"
    division: Literal["closed", "open", "network"] = "open"
    submitter: FolderName | None = None  # default: the inventory's system_defaults.submitter
    mode: Mode = Mode.SHORT
    hosts: list[HostPlan] = Field(min_length=1)
    accuracy: bool = True
    compliance: bool = True
    # official: power-dev's server and client with SPEC PTDaemon (hosts.yaml `director:`);
    # track: subrun's own daemon, never submittable; true: official in submission mode, else track
    power: bool | Literal["official", "track"] = False
    max_reruns: Annotated[StrictInt, Field(ge=0, le=10)] = 2  # automatic re-runs of an INVALID run
    # a dry run with a stand-in model: results whose only fault is accuracy below the target
    # enter the tree, where the official checker names it; by default they are left out
    accuracy_misses_in_tree: bool = False
    output_dir: Path = DEFAULT_OUTPUT
    inference_repo: Path | None = None  # a checkout of mlcommons/inference: run its checker
    power_dev: Path | None = None  # a checkout of mlcommons/power-dev: official power path
    # over each benchmark's own: Server audits at a share of the target QPS, e.g. {TEST01: 0.96}
    compliance_derate: ComplianceDerate = Field(default_factory=dict)
    # the tuning step (bench.tuning): false, auto (tune what the book holds no current record
    # of), true (this campaign tunes every key itself, once)
    tune: bool | Literal["auto"] = False
    tune_resolution: Annotated[float, Field(gt=0, lt=1)] = 0.02  # (hi - lo) / lo to stop at
    tune_margin: Annotated[float, Field(ge=0, lt=0.5)] = 0.05  # the official run's back-off
    tune_probe_s: Annotated[float, Field(ge=1, le=3600)] | None = None  # default: by mode
    # a Server search's confirmation; default: the official run's minimum duration, up to 120 s
    tune_confirm_s: Annotated[float, Field(ge=1, le=3600)] | None = None

    @field_validator("inventory", "output_dir", "inference_repo", "power_dev")
    @classmethod
    def _absolute(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        context = info.context or {}
        if value is None or value.is_absolute() or "base_dir" not in context:
            return value
        return Path(context["base_dir"]) / value

    @field_validator("power", mode="before")
    @classmethod
    def _power_word(cls, value: object) -> object:
        words = ("official", "track", "true", "false")
        if isinstance(value, str) and value.lower() not in words:
            close = difflib.get_close_matches(value.lower(), words, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"'{value}' is not one of official, track, true, false{hint}")
        return value

    @field_validator("tune", mode="before")
    @classmethod
    def _tune_word(cls, value: object) -> object:
        words = ("auto", "true", "false")
        if isinstance(value, str) and value.lower() not in words:
            close = difflib.get_close_matches(value.lower(), words, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"'{value}' is not one of auto, true, false{hint}")
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_entry_per_host(self) -> Campaign:
        twice = sorted(n for n, k in Counter(h.host for h in self.hosts).items() if k > 1)
        if twice:
            raise ValueError(f"host(s) {', '.join(twice)} listed more than once under `hosts:`; "
                             "put all of a host's benchmarks in one entry")
        return self

    @model_validator(mode="after")
    def _fits_kind(self) -> Campaign:
        for host in self.hosts:
            for b in host.benchmarks:
                where = f"hosts[{host.host}].benchmarks[{b.benchmark}]"
                if self.kind == "training" and (b.scenarios or b.settings):
                    raise ValueError(f"{where}: a training campaign has no scenarios or LoadGen "
                                     "settings; give `runs:` (or nothing: the ruleset's count)")
                if self.kind == "inference" and b.runs is not None:
                    raise ValueError(f"{where}: `runs:` is for training campaigns "
                                     "(`kind: training`); an inference campaign runs scenarios")
        if self.kind == "training" and self.power:
            raise ValueError("power is not measured in training campaigns; set `power: false`")
        return self

    @property
    def power_path(self) -> Literal["official", "track"] | None:
        """How power is measured, with `power: true` resolved by the mode; None for no power."""
        if self.power is True:
            return "official" if self.mode is Mode.SUBMISSION else "track"
        return self.power or None

    @property
    def paths(self) -> CampaignPaths:
        """Where this campaign's store, tree, report and the other outputs are."""
        return CampaignPaths(self.output_dir, self.name)


def load_campaign(path: Path) -> Campaign:
    """Load a campaign YAML file (relative paths resolve against its folder)."""
    return load_model(Path(path), Campaign)
