"""LoadGen settings of a run: the user.conf keys, their text, and audit.config for compliance runs.

LoadGen loads its own mlperf.conf (compiled in) the first time a harness loads user.conf, so a run
gets exactly one user.conf and never a second mlperf.conf (LoadGen logs loading two conf files as
an error). Keys are written with the model wildcard, `*.<LoadGen scenario>.<key>`, so they apply
whatever model name the harness passes to LoadGen.

Submission mode writes only the performance targets and nothing that lowers an official duration
or count; short mode lowers min_duration and min_query_count so a run takes seconds (its verdict
marks it not submittable).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from bench.loadgen_keys import key_problem
from bench.rules import RoundRules
from bench.run import Mode, RunKind, Scenario, Setting
from lab.errors import ConfigError

# Keys that lower or bypass an official duration, count or sampling, or turn a run into an audit;
# a submission-mode user.conf must not carry them.
OFFICIAL_KEYS = frozenset({
    "min_duration", "max_duration", "min_query_count", "max_query_count",
    "performance_sample_count_override", "accuracy_sample_count_override", "samples_per_query",
    "target_latency_percentile", "mode", "accuracy_log_rng_seed", "accuracy_log_probability",
    "accuracy_log_sampling_target", "performance_issue_unique", "performance_issue_same",
    "performance_issue_same_index", "sample_concatenate_permutation", "test05",
    "qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed",
})
# used with fullmatch: `$` would let a trailing newline through ("min_duration\n")
KEY_PATTERN = re.compile(r"[\w.*-]+\.(\*|SingleStream|MultiStream|Offline|Server)\.\w+")
SAMPLING_KINDS = (RunKind.TEST01, RunKind.TEST08)


class PerfTargets(BaseModel):
    """Performance inputs for one host x benchmark x scenario (hosts.yaml, the campaign file or
    the benchmark manifest's defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_qps: float | None = Field(default=None, gt=0)  # Offline expected / Server target QPS
    target_latency_ms: float | None = Field(default=None, gt=0)  # SingleStream/MultiStream
    extra: dict[str, int | float] = Field(default_factory=dict)  # more keys: coalesce_queries


class ShortMode(BaseModel):
    """What short mode lowers; defaults keep each run to about a second on a fast SUT."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_duration_ms: int = Field(default=1000, ge=0)
    # Fewer queries can never meet LoadGen's early stopping: 64 for SingleStream (90th
    # percentile), 662 for MultiStream, 459 for Server (99th percentile, every query in time)
    min_query_count: dict[Scenario, int] = Field(default_factory=lambda: {
        Scenario.SINGLE_STREAM: 64, Scenario.MULTI_STREAM: 662, Scenario.OFFLINE: 1,
        Scenario.SERVER: 459, Scenario.INTERACTIVE: 459})
    accuracy_sample_count: int | None = Field(default=None, gt=0)  # None: the whole dataset


def run_settings(scenario: Scenario, mode: Mode, targets: PerfTargets,
                 short: ShortMode | None = None) -> dict[str, Setting]:
    """The user.conf keys of a run (`*.<scenario>.<key>` -> value), for RunSpec.settings."""
    sc = scenario.loadgen
    settings: dict[str, Setting] = {}
    if targets.target_qps is not None and scenario in (
            Scenario.OFFLINE, Scenario.SERVER, Scenario.INTERACTIVE):
        settings[f"*.{sc}.target_qps"] = targets.target_qps
    if targets.target_latency_ms is not None and scenario in (
            Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        settings[f"*.{sc}.target_latency"] = targets.target_latency_ms
    for key, value in targets.extra.items():
        settings[key if "." in key else f"*.{sc}.{key}"] = value
    if mode is Mode.SHORT:  # lowered values only where the campaign set none of its own
        short = short or ShortMode()
        settings.setdefault(f"*.{sc}.min_duration", short.min_duration_ms)
        if scenario in short.min_query_count:
            settings.setdefault(f"*.{sc}.min_query_count", short.min_query_count[scenario])
        if short.accuracy_sample_count:
            settings.setdefault(f"*.{sc}.accuracy_sample_count_override",
                                short.accuracy_sample_count)
    check_settings(settings, mode)
    return settings


# The keys that set how hard LoadGen drives the SUT: a compliance test runs at its reference's.
LOAD_KEYS = ("target_qps", "target_latency", "samples_per_query")


def load_of(settings: Mapping[str, Setting], scenario: Scenario) -> dict[str, Setting]:
    """The load keys a run's settings hold (`*.<scenario>.<key>` -> value)."""
    wanted = {f"*.{scenario.loadgen}.{name}" for name in LOAD_KEYS}
    return {k: v for k, v in settings.items() if k in wanted}


def compared_settings(test: Mapping[str, Setting], reference: Mapping[str, Setting],
                      scenario: Scenario, factor: float) -> dict[str, Setting]:
    """A compliance test's settings at the load of the performance attempt it is compared
    with: that attempt's target_qps / target_latency / samples per query replace the plan's
    (a re-run at a lower target moves its tests with it), then the test's derate applies to
    that value. The test's own durations, counts and keys stay."""
    own = {k: v for k, v in test.items() if k not in load_of(test, scenario)}
    return derated({**own, **load_of(reference, scenario)}, scenario, factor)


def derated(settings: dict[str, Setting], scenario: Scenario, factor: float) -> dict[str, Setting]:
    """A Server (or Interactive) compliance run's settings at factor x the target QPS: audits
    are run a little below the performance run's load, as submitters run them, so that the
    test's own overhead does not push it over the latency bound. Other scenarios unchanged."""
    key = f"*.{scenario.loadgen}.target_qps"
    if scenario not in (Scenario.SERVER, Scenario.INTERACTIVE) or factor == 1.0 \
            or not isinstance(settings.get(key), int | float):
        return settings
    return {**settings, key: round(float(settings[key]) * factor, 3)}


def check_settings(settings: dict[str, Setting], mode: Mode) -> None:
    """ConfigError if a key is malformed, or lowers an official value in submission mode."""
    for key, value in settings.items():
        if not KEY_PATTERN.fullmatch(key):
            raise ConfigError(f"user.conf key '{key}' is not of the form model.scenario.key "
                              "(e.g. '*.Offline.target_qps').")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"user.conf key '{key}' needs a number, got {value!r}: LoadGen "
                              "accepts only integers and decimals.")
        name = key.rsplit(".", 1)[1]
        if problem := key_problem(name, value):
            raise ConfigError(f"user.conf key '{key}': {problem}.")
        if mode is Mode.SUBMISSION and name in OFFICIAL_KEYS:
            raise ConfigError(
                f"user.conf key '{key}' overrides an official LoadGen setting; a submission run "
                "must keep the official durations, counts and seeds. Remove it, or run the "
                "campaign in short mode (not submittable).")


def render_conf(settings: Mapping[str, Setting], *, header: str = "") -> str:
    """The text of a LoadGen config file (user.conf or audit.config) holding these keys."""
    lines = [f"# {line}" for line in header.splitlines() if line.strip()]
    lines += [f"{key} = {_number(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def user_conf(settings: dict[str, Setting], mode: Mode, *, header: str = "") -> str:
    """user.conf text for a run's settings, checked for its mode."""
    check_settings(settings, mode)
    note = "short mode: lowered durations and counts, not submittable" if mode is Mode.SHORT \
        else "submission mode: official durations and counts from LoadGen's mlperf.conf"
    return render_conf(settings, header=f"{header}\n{note}" if header else note)


SHORT_SAMPLING_FLOOR = 64  # logged samples a short TEST01 still compares


def audit_config(kind: RunKind, model: str, rules: RoundRules, *,
                 sampling_share: float = 1.0) -> str:
    """audit.config text of a compliance test for a model, from the round's rules.

    sampling_share < 1 scales TEST01's accuracy_log_sampling_target for a short run: LoadGen
    logs target / expected-samples of the responses, so the round's target on a run a hundredth
    as long would log every response and slow the test down against its reference. The share
    keeps the official proportion (never below SHORT_SAMPLING_FLOOR samples)."""
    if not kind.is_compliance:
        raise ConfigError(f"{kind} is not a compliance test; only TEST* runs get an audit.config.")
    lines = dict(rules.audit_lines(kind, model))
    for key, value in lines.items():
        if key.endswith(".accuracy_log_sampling_target") and sampling_share < 1.0 \
                and isinstance(value, int | float):
            lines[key] = max(SHORT_SAMPLING_FLOOR, round(value * sampling_share))
    if kind in SAMPLING_KINDS and not any(k.endswith(".accuracy_log_sampling_target")
                                          for k in lines):
        raise ConfigError(
            f"bench/rounds/{rules.round}.yaml gives no {kind} accuracy_log_sampling_target for "
            f"model '{model}', so its audit.config cannot be written. Add it under "
            f"models.{rules.resolve(model)}.audit.{kind}.")
    return render_conf(lines, header=f"{kind} audit.config for {rules.resolve(model)}, "
                                     f"MLPerf Inference {rules.round}")


def _number(value: Setting) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)
