"""Turn a campaign into the ordered list of runs each host executes, with duration estimates.

Per host the order is: for each benchmark and scenario, performance, accuracy, the round's
compliance tests for the model (which compare against those two), then the power run. Estimates
follow what LoadGen will really do: the minimum durations and query counts of the mode, the
samples it issues for the targets it is given (campaign settings over the manifest's defaults;
Offline issues 1.1 x target_qps x min_duration samples), and how fast the host really is, from
the store's last performance run of that host and benchmark when there is one (`bench.measured`).
Each run's note says what its estimate rests on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bench.campaign import BenchmarkPlan, Campaign
from bench.manifest import Manifest
from bench.measured import Measured, MeasuredKey
from bench.rules import RoundRules
from bench.run import Mode, RunKind, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, derated, run_settings
from lab.errors import ConfigError

RUN_OVERHEAD_S = 4.0  # container start, log collection, verdict
POWER_OVERHEAD_S = 25.0  # analyzer set-up and the pauses around ranging and testing
OFFICIAL_POWER_OVERHEAD_S = 45.0  # power-dev's own: NTP checks and its server's fixed sleeps
SHORT_POWER_MIN_DURATION_MS = 5000  # a power window needs several 1 s analyzer samples
# Compliance tests compare their performance with the performance run's within 10 %: runs of a
# second are too noisy for that, so short mode gives compared runs a few seconds.
SHORT_COMPARED_MIN_DURATION_MS = 3000
FALLBACK_QPS = 100.0
OFFLINE_SAMPLE_MARGIN = 1.1  # LoadGen issues 1.1 x target_qps x min_duration Offline samples
# LoadGen's minimum query counts where the round file gives none: mlperf.conf's (MultiStream
# 662) over LoadGen's built-in default of 100; early stopping, not the count, bounds the rest
LOADGEN_MIN_QUERIES = {Scenario.SINGLE_STREAM: 100, Scenario.MULTI_STREAM: 662,
                       Scenario.SERVER: 100, Scenario.INTERACTIVE: 100, Scenario.OFFLINE: 1}


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan, its estimate, and the runs it compares against."""

    spec: RunSpec
    estimate_s: float
    after: tuple[str, ...] = ()  # labels of runs that must finish first (same host)
    assumption: str = ""  # what the estimate had to assume

    @property
    def label(self) -> str:
        return self.spec.label


@dataclass
class Plan:
    """The runs of a campaign, in execution order per host."""

    campaign: Campaign
    runs: list[PlannedRun] = field(default_factory=list)

    def hosts(self) -> list[str]:
        return [h.host for h in self.campaign.hosts]

    def for_host(self, host: str) -> list[PlannedRun]:
        return [r for r in self.runs if r.spec.host == host]

    def host_estimate_s(self, host: str) -> float:
        return sum(r.estimate_s for r in self.for_host(host))

    @property
    def estimate_s(self) -> float:
        """Wall time: hosts run in parallel, each host one run at a time."""
        return max((self.host_estimate_s(h) for h in self.hosts()), default=0.0)

    def with_images(self, digests: Mapping[tuple[str, str], str],
                    loadgen_version: str) -> Plan:
        """The plan with each spec bound to its image digest and LoadGen build (final keys)."""
        bound = [
            PlannedRun(r.spec.model_copy(update={
                "image_digest": digests.get((r.spec.host, r.spec.benchmark), ""),
                "loadgen_version": loadgen_version}), r.estimate_s, r.after, r.assumption)
            for r in self.runs]
        return Plan(self.campaign, bound)

    def refine(self, measured_s: Mapping[str, float]) -> Plan:
        """Replace estimates by measured durations of earlier attempts (by run label)."""
        return Plan(self.campaign, [
            PlannedRun(r.spec, measured_s.get(r.label, r.estimate_s), r.after, r.assumption)
            for r in self.runs])


def make_plan(campaign: Campaign, manifests: Mapping[str, Manifest], rules: RoundRules,
              measured: Mapping[MeasuredKey, Measured] | None = None) -> Plan:
    """Every run of the campaign, ordered per host, with estimates (from the store's
    measurements of each host where `measured` has them, else from the targets)."""
    plan = Plan(campaign)
    for host_plan in campaign.hosts:
        for bench in host_plan.benchmarks:
            manifest = manifests[bench.benchmark]
            _check_served(campaign, host_plan.host, bench, manifest)
            for scenario in bench.scenarios or manifest.scenarios:
                plan.runs.extend(_scenario_runs(campaign, host_plan.host, bench, manifest,
                                                scenario, rules, measured or {}))
    return plan


def _check_served(campaign: Campaign, host: str, bench: BenchmarkPlan,
                  manifest: Manifest) -> None:
    """A scenario (or its settings) the benchmark does not serve is refused at plan time, not
    when its run starts."""
    asked = [*(bench.scenarios or []), *bench.settings]
    unserved = sorted({s.value for s in asked if s not in manifest.scenarios})
    if unserved:
        raise ConfigError(
            f"Campaign '{campaign.name}', host '{host}': benchmark '{manifest.name}' does not "
            f"serve {', '.join(unserved)}; it serves "
            f"{', '.join(s.value for s in manifest.scenarios)}. Remove the scenario (and its "
            "settings) or pick a benchmark that serves it.")


def kinds_for(campaign: Campaign, manifest: Manifest, rules: RoundRules) -> list[RunKind]:
    """The run kinds of one benchmark x scenario, in execution order."""
    kinds = [RunKind.PERFORMANCE]
    if campaign.accuracy:
        kinds.append(RunKind.ACCURACY)
    if campaign.compliance:
        tests = rules.model(manifest.official_model).compliance or ()
        kinds.extend(t for t in tests if t in (RunKind.TEST01, RunKind.TEST04, RunKind.TEST05)
                     and (t is not RunKind.TEST01 or campaign.accuracy))
    if campaign.power:
        kinds.append(RunKind.POWER)
    return kinds


def _scenario_runs(campaign: Campaign, host: str, bench: BenchmarkPlan, manifest: Manifest,
                   scenario: Scenario, rules: RoundRules,
                   measured: Mapping[MeasuredKey, Measured]) -> Iterable[PlannedRun]:
    targets = targets_for(bench, manifest, scenario)
    settings = run_settings(scenario, campaign.mode, targets)
    load = Load(scenario, targets, measured.get((host, manifest.name, scenario)),
                measured.get((host, manifest.name, Scenario.OFFLINE)))
    labels: dict[RunKind, str] = {}
    for kind in kinds_for(campaign, manifest, rules):
        own = _short_floor(settings, targets, scenario, kind, campaign.mode)
        if kind.is_compliance:
            factors = {**manifest.compliance_derate, **campaign.compliance_derate}
            own = derated(own, scenario, next(
                (f for test, f in factors.items() if test == kind.value), 1.0))
        spec = RunSpec(host=host, benchmark=manifest.name, model=manifest.official_model,
                       scenario=scenario, kind=kind, mode=campaign.mode, round=campaign.round,
                       settings=own)
        labels[kind] = spec.label
        after: tuple[str, ...] = ()
        if kind.is_compliance:
            after = tuple(labels[k] for k in (RunKind.PERFORMANCE, RunKind.ACCURACY)
                          if k in labels)
        if kind is RunKind.ACCURACY:
            run_s, note = load.accuracy_s(manifest.dataset_size)
        else:
            run_s, note = load.run_s(*_minimums(spec, rules, manifest))
        if kind is RunKind.POWER:
            run_s = 2 * run_s + (OFFICIAL_POWER_OVERHEAD_S if campaign.power_path == "official"
                                 else POWER_OVERHEAD_S)  # ranging, then testing
        yield PlannedRun(spec, run_s + RUN_OVERHEAD_S, after, note)


def _short_floor(settings: dict[str, Setting], targets: PerfTargets, scenario: Scenario,
                 kind: RunKind, mode: Mode) -> dict[str, Setting]:
    """Short mode's minimum duration per kind: power windows need several analyzer samples
    (always), compared runs a few seconds (unless the campaign chose its own duration)."""
    if mode is not Mode.SHORT:
        return settings
    key = f"*.{scenario.loadgen}.min_duration"
    if kind is RunKind.POWER:
        floor = SHORT_POWER_MIN_DURATION_MS
    elif (kind is RunKind.PERFORMANCE or kind.is_compliance) and \
            "min_duration" not in targets.extra:
        floor = SHORT_COMPARED_MIN_DURATION_MS
    else:
        return settings
    return {**settings, key: max(int(settings.get(key, 0)), floor)}


def targets_for(bench: BenchmarkPlan, manifest: Manifest, scenario: Scenario) -> PerfTargets:
    """Performance targets of a scenario: campaign settings over the manifest's defaults."""
    merged: dict[str, Setting] = {**manifest.user_conf_defaults(scenario),
                                  **bench.settings.get(scenario, {})}
    qps = merged.pop("target_qps", None)
    latency = merged.pop("target_latency", merged.pop("target_latency_ms", None))
    extra = {k: v for k, v in merged.items() if isinstance(v, int | float)}
    if scenario in (Scenario.SERVER, Scenario.INTERACTIVE) and latency is not None:
        latency = None  # the Server latency bound is the round's, not a user.conf target
    return PerfTargets(target_qps=float(qps) if qps is not None else None,
                       target_latency_ms=float(latency) if latency is not None else None,
                       extra=extra)


def _minimums(spec: RunSpec, rules: RoundRules, manifest: Manifest) -> tuple[float, int]:
    """The run's minimum duration (s) and query count (Offline: samples), as LoadGen reads them:
    the run's own settings (short mode, the campaign) over the round's."""
    sc = spec.scenario.loadgen
    duration_ms = spec.settings.get(f"*.{sc}.min_duration", rules.min_duration_ms)
    queries = spec.settings.get(f"*.{sc}.min_query_count")
    if queries is None:
        queries = rules.min_query_count.get(spec.scenario, LOADGEN_MIN_QUERIES[spec.scenario])
        if spec.scenario is Scenario.OFFLINE:
            queries = rules.model(manifest.official_model).offline_min_samples_per_query or 1
    return float(duration_ms) / 1000, int(queries)


@dataclass(frozen=True)
class Load:
    """How LoadGen loads a scenario (the targets it is given) and how fast the host really is
    (the store's last measurement, when there is one): together they give a run's length."""

    scenario: Scenario
    targets: PerfTargets
    measured: Measured | None = None  # this scenario's last performance run
    offline: Measured | None = None  # the host's Offline throughput, the ceiling of Server

    def run_s(self, min_duration_s: float, min_queries: int) -> tuple[float, str]:
        """Seconds one performance-mode run lasts, and what the figure rests on."""
        if self.scenario is Scenario.OFFLINE:
            return self._offline_s(min_duration_s, min_queries)
        if self.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
            return self._stream_s(min_duration_s, min_queries)
        return self._server_s(min_duration_s, min_queries)

    def accuracy_s(self, dataset_size: int) -> tuple[float, str]:
        """Seconds an accuracy run lasts: every sample of the dataset once."""
        per_query = 8 if self.scenario is Scenario.MULTI_STREAM else 1
        measured = self.measured or self.offline
        if measured and measured.samples_per_s:
            return dataset_size / measured.samples_per_s, f"measured by {measured.source}"
        if measured and measured.latency_s:
            return dataset_size / per_query * measured.latency_s, \
                f"measured by {measured.source}"
        rate, note = self._target_rate()
        return dataset_size / (rate * per_query), note

    def _offline_s(self, min_duration_s: float, min_samples: int) -> tuple[float, str]:
        target, note = self._target_rate()
        samples = max(min_samples, math.ceil(OFFLINE_SAMPLE_MARGIN * target * min_duration_s))
        measured = self.measured
        if measured is None or not measured.samples_per_s:
            return samples / target, note
        rate = measured.samples_per_s
        seconds = samples / rate
        if rate < target:
            return seconds, (f"Offline target_qps {target:g} is above the {rate:.0f} samples/s "
                             f"measured by {measured.source}: LoadGen issues {samples} samples, "
                             f"so the run lasts {seconds:.0f} s; set target_qps near "
                             f"{rate:.0f} for a run of the minimum duration")
        return seconds, f"measured by {measured.source}"

    def _stream_s(self, min_duration_s: float, min_queries: int) -> tuple[float, str]:
        # one query at a time until both the minimum duration and the minimum count are met
        target, note = self._target_rate()
        measured = self.measured
        if measured is None or not measured.latency_s:
            return max(min_duration_s, min_queries / target), note
        return max(min_duration_s, min_queries * measured.latency_s), \
            f"measured by {measured.source}"

    def _server_s(self, min_duration_s: float, min_queries: int) -> tuple[float, str]:
        target, note = self._target_rate()
        queries = max(min_queries, math.ceil(target * min_duration_s))
        schedule_s = queries / target
        offline = self.offline
        if offline is not None and offline.samples_per_s and offline.samples_per_s < target:
            seconds = queries / offline.samples_per_s
            return seconds, (f"{self.scenario.value} target_qps {target:g} is above the "
                             f"{offline.samples_per_s:.0f} samples/s the host reached Offline "
                             f"({offline.source}): the queue grows, the run lasts about "
                             f"{seconds:.0f} s and will be INVALID")
        return schedule_s, note

    def _target_rate(self) -> tuple[float, str]:
        """Queries per second LoadGen is told to expect, and what had to be assumed."""
        if self.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM) \
                and self.targets.target_latency_ms:
            return 1000.0 / self.targets.target_latency_ms, ""
        if self.targets.target_qps:
            return self.targets.target_qps, ""
        return FALLBACK_QPS, f"no expected QPS/latency given: assumed {FALLBACK_QPS:g} queries/s"
