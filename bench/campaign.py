"""A campaign: which hosts run which benchmarks and scenarios, under which round and mode.

The same model is the campaign YAML file a person writes and the parameters of the Prefect flow,
so `subrun run campaign.yaml` and `prefect deployment run submission/full` validate alike.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bench.manifest import ComplianceDerate
from bench.run import Mode, RunKind, Scenario, Setting
from lab.config import DEFAULT_INVENTORY
from lab.names import FolderName
from lab.yamlfile import load_model

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
UserConf = dict[str, Setting]  # LoadGen user.conf keys without the model.scenario prefix


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BenchmarkPlan(Strict):
    """One benchmark on one host: its scenarios and per-scenario LoadGen settings."""

    benchmark: Name  # a folder under images/
    scenarios: list[Scenario] | None = None  # default: every scenario the manifest supports
    settings: dict[Scenario, UserConf] = Field(default_factory=dict)


class HostPlan(Strict):
    """What one host of the inventory runs."""

    host: Name
    benchmarks: list[BenchmarkPlan] = Field(min_length=1)


class Campaign(Strict):
    """Everything that decides a campaign; unset fields take the defaults a submitter expects."""

    name: Name = "campaign"
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
    max_reruns: Annotated[int, Field(ge=0, le=10)] = 2  # automatic re-runs of an INVALID run
    output_dir: Path = Path("out")
    inference_repo: Path | None = None  # a checkout of mlcommons/inference: run its checker
    power_dev: Path | None = None  # a checkout of mlcommons/power-dev: official power path
    # over each benchmark's own: Server audits at a share of the target QPS, e.g. {TEST01: 0.96}
    compliance_derate: ComplianceDerate = Field(default_factory=dict)

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

    @model_validator(mode="after")
    def _one_entry_per_host(self) -> Campaign:
        names = [h.host for h in self.hosts]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"host(s) {', '.join(twice)} listed more than once under `hosts:`; "
                             "put all of a host's benchmarks in one entry")
        return self

    @property
    def kinds(self) -> list[RunKind]:
        """The run kinds this campaign asks for, before the round's per-model test list."""
        kinds = [RunKind.PERFORMANCE]
        if self.accuracy:
            kinds.append(RunKind.ACCURACY)
        if self.power_path:
            kinds.append(RunKind.POWER)
        return kinds

    @property
    def power_path(self) -> Literal["official", "track"] | None:
        """How power is measured, with `power: true` resolved by the mode; None for no power."""
        if self.power is True:
            return "official" if self.mode is Mode.SUBMISSION else "track"
        return self.power or None

    @property
    def store_dir(self) -> Path:
        """Where the run store of this campaign lives (shared by resumed runs)."""
        return self.output_dir / self.name / "store"

    @property
    def tree_dir(self) -> Path:
        return self.output_dir / self.name / "submission"


def load_campaign(path: Path) -> Campaign:
    """Load a campaign YAML file (relative paths resolve against its folder)."""
    return load_model(Path(path), Campaign)
