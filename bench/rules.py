"""What each MLPerf Inference round requires, as data: one YAML file per round in bench/rounds/.

`load_rules("v6.1")` reads `bench/rounds/v6.1.yaml` into a strict `RoundRules`. Everything that
depends on the round (seeds, models and aliases, scenarios per system type, compliance tests,
durations and counts, accuracy targets and the accuracy.txt patterns, latency bounds, audit.config
lines, the layout and the checker's --version) is read from there; no code names a round.

A value a round file leaves out is *not known* (checker.md did not give it for that round), which
is different from "not required": callers get None and report the check as not judged.
"""

from __future__ import annotations

import difflib
import re
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from bench.run import RunKind, Scenario
from lab.errors import ConfigError
from lab.yamlfile import load_model

ROUNDS_DIR = Path(__file__).resolve().parent / "rounds"
SystemType = Literal["datacenter", "edge", "datacenter,edge"]
U64 = Annotated[int, Field(ge=0, lt=2**64)]
RoundName = Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+$")]
# LoadGen config keys are "model.scenario.key"; model names may hold dots (llama3.1-8b)
AuditKey = Annotated[str, StringConstraints(
    pattern=r"^[\w.*-]+\.(\*|SingleStream|MultiStream|Offline|Server)\.\w+$")]
AuditValue = int | float


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Seeds(Strict):
    """The three LoadGen seeds the checker compares with the round's."""

    qsl_rng_seed: U64
    sample_index_rng_seed: U64
    schedule_rng_seed: U64


class ScenarioSet(Strict):
    """Scenarios of one model on one system type: all of `required`, at least one of `one_of`."""

    required: tuple[Scenario, ...] = ()
    one_of: tuple[Scenario, ...] = ()

    @property
    def allowed(self) -> frozenset[Scenario]:
        return frozenset(self.required) | frozenset(self.one_of)


class MetricTarget(Strict):
    """One accuracy bound: absolute `min`/`max`, or `reference` times `min_factor`/`max_factor`."""

    metric: str
    min: float | None = None
    max: float | None = None
    reference: float | None = None
    min_factor: float | None = None
    max_factor: float | None = None
    scenarios: tuple[Scenario, ...] = ()  # empty: every scenario

    @model_validator(mode="after")
    def _one_form(self) -> MetricTarget:
        relative = self.reference is not None
        if relative == (self.min is not None or self.max is not None):
            raise ValueError("give either min/max, or reference with min_factor/max_factor")
        if relative and self.min_factor is None and self.max_factor is None:
            raise ValueError("reference needs min_factor and/or max_factor")
        return self

    @property
    def lower(self) -> float | None:
        """The smallest passing value, if bounded below."""
        if self.reference is not None:
            return None if self.min_factor is None else self.reference * self.min_factor
        return self.min

    @property
    def upper(self) -> float | None:
        """The largest passing value, if bounded above."""
        if self.reference is not None:
            return None if self.max_factor is None else self.reference * self.max_factor
        return self.max


class TokenLimits(Strict):
    """p99 time to first token and time per output token, in milliseconds."""

    ttft_ms: float
    tpot_ms: float


class ModelRules(Strict):
    """What one round requires of one model; None means the round file does not know."""

    aliases: tuple[str, ...] = ()
    # absent system type: the model is not run there; null: not known for this round
    scenarios: dict[SystemType, ScenarioSet | None] | None = None
    compliance: tuple[RunKind, ...] | None = None
    performance_sample_count: int | None = None
    dataset_size: int | None = None
    accuracy_sample_count: dict[Scenario | Literal["*"], int] = Field(default_factory=dict)
    offline_min_samples_per_query: int | None = None
    min_duration_exempt: bool = False
    accuracy: tuple[MetricTarget, ...] | None = None
    test01_delta_pct: dict[str, float] = Field(default_factory=dict)
    latency_constraint_ns: dict[Scenario, int] = Field(default_factory=dict)
    token_latency_ms: dict[Scenario, TokenLimits] = Field(default_factory=dict)
    audit: dict[RunKind, dict[AuditKey, AuditValue]] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


class RoundRules(Strict):
    """One round's rules, as loaded from bench/rounds/<round>.yaml."""

    round: RoundName
    checker_version: str
    layout: Literal["v5", "v6"]
    loadgen_release: str | None = None
    seeds: Seeds
    min_duration_ms: int
    min_query_count: dict[Scenario, int] = Field(default_factory=dict)
    test01_delta_pct: float = 1.0
    accuracy_patterns: dict[str, str]
    audit: dict[RunKind, dict[AuditKey, AuditValue]] = Field(default_factory=dict)
    models_known: bool = True
    models: dict[str, ModelRules]
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> RoundRules:
        for metric, pattern in self.accuracy_patterns.items():
            try:
                groups = re.compile(pattern).groups
            except re.error as e:
                raise ValueError(f"accuracy_patterns.{metric} is not a valid regex: {e}") from e
            if groups != 1:
                raise ValueError(f"accuracy_patterns.{metric} needs exactly one group (the value)")
        seen: dict[str, str] = {}
        for name, model in self.models.items():
            for target in model.accuracy or ():
                if target.metric not in self.accuracy_patterns:
                    raise ValueError(f"models.{name}: metric {target.metric} has no pattern in "
                                     "accuracy_patterns")
            for alias in model.aliases:
                if alias in self.models or alias in seen:
                    raise ValueError(f"models.{name}: alias {alias} is already taken")
                seen[alias] = name
        return self

    def resolve(self, name: str) -> str:
        """The official model name for a name or alias; ConfigError for an unknown one."""
        if name in self.models or not self.models_known:
            return name
        for official, model in self.models.items():
            if name in model.aliases:
                return official
        known = sorted([*self.models, *(a for m in self.models.values() for a in m.aliases)])
        guess = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean '{guess[0]}'?" if guess else f" Valid names: {', '.join(known)}."
        raise ConfigError(f"Model '{name}' is not a benchmark of MLPerf Inference {self.round} "
                          f"(bench/rounds/{self.round}.yaml).{hint}")

    def model(self, name: str) -> ModelRules:
        """The rules of a model (alias allowed); empty (all unknown) when the round lists none."""
        official = self.resolve(name)
        return self.models.get(official, ModelRules())

    def scenarios(self, name: str, system_type: SystemType) -> ScenarioSet | None:
        """Scenarios the model needs on this system type; None when not known."""
        table = self.model(name).scenarios
        if table is None or system_type not in table:
            return None if table is None else ScenarioSet()
        return table[system_type]

    def accuracy_targets(self, name: str, scenario: Scenario) -> tuple[MetricTarget, ...] | None:
        """Accuracy bounds for this model and scenario; None when not known."""
        targets = self.model(name).accuracy
        if targets is None:
            return None
        return tuple(t for t in targets if not t.scenarios or scenario in t.scenarios)

    def accuracy_sample_count(self, name: str, scenario: Scenario) -> int | None:
        """How many samples an accuracy run must cover; None when not known."""
        model = self.model(name)
        counts = model.accuracy_sample_count
        return counts.get(scenario, counts.get("*", model.dataset_size))

    def delta_pct(self, name: str, metric: str) -> float:
        """Allowed TEST01 baseline/compliance accuracy difference, in percent."""
        return self.model(name).test01_delta_pct.get(metric, self.test01_delta_pct)

    def audit_lines(self, kind: RunKind, name: str) -> dict[str, AuditValue]:
        """audit.config lines of a compliance test for a model: shared ones, then its own."""
        shared = self.audit.get(kind, {})
        own = self.model(name).audit.get(kind, {})
        if not shared and not own:
            raise ConfigError(f"bench/rounds/{self.round}.yaml has no audit.config for {kind} "
                              f"(model {name}); this round's rules do not define that test.")
        return {**shared, **own}


def available_rounds() -> list[str]:
    """Rounds that have a rules file, oldest first."""
    names = [p.stem for p in ROUNDS_DIR.glob("v*.yaml")]
    return sorted(names, key=lambda n: tuple(int(x) for x in n[1:].split(".")))


@cache
def load_rules(round_name: str) -> RoundRules:
    """Load and validate bench/rounds/<round>.yaml; ConfigError for an unknown round."""
    path = ROUNDS_DIR / f"{round_name}.yaml"
    if not path.is_file():
        rounds = available_rounds()
        guess = difflib.get_close_matches(round_name, rounds, n=1)
        hint = f" Did you mean '{guess[0]}'?" if guess else ""
        raise ConfigError(f"No rules for round '{round_name}': known rounds are "
                          f"{', '.join(rounds)} (files in {ROUNDS_DIR}).{hint}")
    rules = load_model(path, RoundRules)
    if rules.round != round_name:
        raise ConfigError(f"{path}: 'round' says {rules.round}, but the file is named for "
                          f"{round_name}. Make them agree.")
    return rules


def round_of_seeds(seeds: Seeds) -> str | None:
    """The round whose official seeds these are, or None."""
    for name in available_rounds():
        if load_rules(name).seeds == seeds:
            return name
    return None
