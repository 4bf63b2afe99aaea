"""Turn a campaign into the ordered list of runs each host executes, with duration estimates.

Per host the order is: for each benchmark and scenario, performance, accuracy, the round's
compliance tests for the model (which compare against those two), then the power run. Estimates
come from the minimum durations and query counts of the mode, the expected throughput or latency
(campaign settings over the manifest's defaults) and the accuracy dataset size; they are refined
from real run times once the campaign has run before (see `refine`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bench.campaign import BenchmarkPlan, Campaign
from bench.manifest import Manifest
from bench.rules import RoundRules
from bench.run import Mode, RunKind, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, run_settings

RUN_OVERHEAD_S = 4.0  # container start, log collection, verdict
POWER_OVERHEAD_S = 25.0  # analyzer set-up and the pauses around ranging and testing
SHORT_POWER_MIN_DURATION_MS = 5000  # a power window needs several 1 s analyzer samples
# Compliance tests compare their performance with the performance run's within 10 %: runs of a
# second are too noisy for that, so short mode gives compared runs a few seconds.
SHORT_COMPARED_MIN_DURATION_MS = 3000
FALLBACK_QPS = 100.0
# LoadGen's own minimum query counts (mlperf.conf) where the round file gives none
LOADGEN_MIN_QUERIES = {Scenario.SINGLE_STREAM: 1024, Scenario.MULTI_STREAM: 270336,
                       Scenario.SERVER: 270336, Scenario.INTERACTIVE: 270336,
                       Scenario.OFFLINE: 1}


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


def make_plan(campaign: Campaign, manifests: Mapping[str, Manifest], rules: RoundRules) -> Plan:
    """Every run of the campaign, ordered per host, with estimates."""
    plan = Plan(campaign)
    for host_plan in campaign.hosts:
        for bench in host_plan.benchmarks:
            manifest = manifests[bench.benchmark]
            for scenario in bench.scenarios or manifest.scenarios:
                plan.runs.extend(_scenario_runs(campaign, host_plan.host, bench, manifest,
                                                scenario, rules))
    return plan


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
                   scenario: Scenario, rules: RoundRules) -> Iterable[PlannedRun]:
    targets = targets_for(bench, manifest, scenario)
    settings = run_settings(scenario, campaign.mode, targets)
    _, assumption = _rate(scenario, targets)
    labels: dict[RunKind, str] = {}
    for kind in kinds_for(campaign, manifest, rules):
        spec = RunSpec(host=host, benchmark=manifest.name, model=manifest.official_model,
                       scenario=scenario, kind=kind, mode=campaign.mode, round=campaign.round,
                       settings=_short_floor(settings, targets, scenario, kind, campaign.mode))
        labels[kind] = spec.label
        after: tuple[str, ...] = ()
        if kind.is_compliance:
            after = tuple(labels[k] for k in (RunKind.PERFORMANCE, RunKind.ACCURACY)
                          if k in labels)
        run_s = _short_s(spec, targets) if campaign.mode is Mode.SHORT \
            else _official_s(scenario, targets, rules, manifest)
        estimate = {
            RunKind.ACCURACY: _accuracy_s(manifest, scenario, targets),
            RunKind.POWER: 2 * run_s + POWER_OVERHEAD_S,
        }.get(kind, run_s)
        yield PlannedRun(spec, estimate + RUN_OVERHEAD_S, after, assumption)


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


def _rate(scenario: Scenario, targets: PerfTargets) -> tuple[float, str]:
    """Queries per second the estimate uses, and what it assumed."""
    if scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM) and targets.target_latency_ms:
        return 1000.0 / targets.target_latency_ms, ""
    if targets.target_qps:
        return targets.target_qps, ""
    return FALLBACK_QPS, f"no expected QPS/latency given: assumed {FALLBACK_QPS:g} queries/s"


def _official_s(scenario: Scenario, targets: PerfTargets, rules: RoundRules,
                manifest: Manifest) -> float:
    """A submission-mode run's length: the round's minimum duration and query counts."""
    rate, _ = _rate(scenario, targets)
    queries = rules.min_query_count.get(scenario, LOADGEN_MIN_QUERIES[scenario])
    if scenario is Scenario.OFFLINE:
        queries = rules.model(manifest.official_model).offline_min_samples_per_query or 1
    return max(rules.min_duration_ms / 1000, queries / rate)


def _short_s(spec: RunSpec, targets: PerfTargets) -> float:
    """A short-mode run's length from its own settings (the campaign's or short mode's)."""
    sc = spec.scenario.loadgen
    rate, _ = _rate(spec.scenario, targets)
    duration_ms = float(spec.settings.get(f"*.{sc}.min_duration", 0))
    queries = float(spec.settings.get(f"*.{sc}.min_query_count", 1))
    return max(duration_ms / 1000, queries / rate)


def _accuracy_s(manifest: Manifest, scenario: Scenario, targets: PerfTargets) -> float:
    rate, _ = _rate(scenario, targets)
    if scenario is Scenario.MULTI_STREAM:
        rate *= 8  # a MultiStream query carries 8 samples
    return manifest.dataset_size / rate
