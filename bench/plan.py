"""Turn a campaign into the ordered list of runs each host executes, with duration estimates.

Per host the order is: for each benchmark and scenario, performance, accuracy, the round's
compliance tests for the model (which compare against those two), then the power run. Estimates
follow what LoadGen will really do: the minimum durations and query counts of the mode, the
samples it issues for the targets it is given (campaign settings over the manifest's defaults;
Offline issues 1.1 x target_qps x min_duration samples), and how fast the host really is, from
the tuning record of the run's image, else the store's last performance run of that host and
benchmark, when there is one (`bench.evidence`).
Each run's estimate (`bench.estimate`) carries its basis, tuned, measured or default, and a note
saying what it rests on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from bench.campaign import BenchmarkPlan, Campaign
from bench.estimate import RUN_OVERHEAD_S, estimate_run
from bench.evidence import Evidence
from bench.manifest import Manifest
from bench.measured import Basis, Measured, MeasuredKey
from bench.rules import RoundRules
from bench.run import Mode, RunKind, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, derated, run_settings
from bench.short_sizes import short_sizes
from lab.errors import ConfigError

__all__ = ["RUN_OVERHEAD_S", "Plan", "PlannedRun", "kinds_for", "make_plan", "targets_for"]
Known = Evidence | Mapping[MeasuredKey, Measured] | None  # a bare mapping: the latest figures


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan, its estimate, and the runs it compares against."""

    spec: RunSpec
    estimate_s: float
    after: tuple[str, ...] = ()  # labels of runs that must finish first (same host)
    assumption: str = ""  # what the estimate had to assume
    basis: Basis = Basis.DEFAULT  # what the host's speed came from: tuned, measured or default
    # a compliance test's load against its reference's (bench.settings.compared_settings);
    # the spec shows it applied to the planned target
    derate: float = 1.0

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

    def defaults(self) -> list[PlannedRun]:
        """The runs whose estimate rests on no measurement of the host: guesses."""
        return [r for r in self.runs if r.basis is Basis.DEFAULT]

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
                "loadgen_version": loadgen_version}), r.estimate_s, r.after, r.assumption,
                r.basis, r.derate)
            for r in self.runs]
        return Plan(self.campaign, bound)

    def reestimated(self, manifests: Mapping[str, Manifest], rules: RoundRules,
                    evidence: Evidence) -> Plan:
        """The same runs estimated again, e.g. once their image digests are known (a tuning
        record applies to its image only)."""
        runs = []
        for r in self.runs:
            found = estimate_run(r.spec, manifests[r.spec.benchmark], rules,
                                 self.campaign.power_path, evidence)
            runs.append(replace(r, estimate_s=found.seconds, assumption=found.note,
                                basis=found.basis))
        return Plan(self.campaign, runs)


def make_plan(campaign: Campaign, manifests: Mapping[str, Manifest], rules: RoundRules,
              measured: Known = None) -> Plan:
    """Every run of the campaign, ordered per host, with estimates (from what the evidence
    knows of each host: tuning records, the store's measurements; else from the targets)."""
    evidence = measured if isinstance(measured, Evidence) else \
        Evidence.of_latest(measured or {})
    plan = Plan(campaign)
    for host_plan in campaign.hosts:
        for bench in host_plan.benchmarks:
            manifest = manifests[bench.benchmark]
            _check_served(campaign, host_plan.host, bench, manifest)
            for scenario in bench.scenarios or manifest.scenarios:
                plan.runs.extend(_scenario_runs(campaign, host_plan.host, bench, manifest,
                                                scenario, rules, evidence))
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
                   evidence: Evidence) -> Iterable[PlannedRun]:
    targets = targets_for(bench, manifest, scenario)
    settings = run_settings(scenario, campaign.mode, targets)
    labels: dict[RunKind, str] = {}
    for kind in kinds_for(campaign, manifest, rules):
        own = _short_floor(settings, targets, scenario, kind, campaign.mode)
        factor = 1.0
        if kind.is_compliance:
            factors = {**manifest.compliance_derate, **campaign.compliance_derate}
            factor = next((f for test, f in factors.items() if test == kind.value), 1.0)
            own = derated(own, scenario, factor)
        spec = RunSpec(host=host, benchmark=manifest.name, model=manifest.official_model,
                       scenario=scenario, kind=kind, mode=campaign.mode, round=campaign.round,
                       settings=own)
        labels[kind] = spec.label
        after: tuple[str, ...] = ()
        if kind.is_compliance:
            after = tuple(labels[k] for k in (RunKind.PERFORMANCE, RunKind.ACCURACY)
                          if k in labels)
        found = estimate_run(spec, manifest, rules, campaign.power_path, evidence)
        yield PlannedRun(spec, found.seconds, after, found.note, found.basis, factor)


def _short_floor(settings: dict[str, Setting], targets: PerfTargets, scenario: Scenario,
                 kind: RunKind, mode: Mode) -> dict[str, Setting]:
    """Short mode's floors per kind (bench/short_mode.yaml says why): power windows need several
    analyzer samples (always); compared runs (performance and its tests) enough seconds and
    queries for the statistic they are compared on, unless the campaign chose its own value."""
    if mode is not Mode.SHORT:
        return settings
    sizes = short_sizes()
    floors: dict[str, int] = {}
    if kind is RunKind.POWER:
        floors["min_duration"] = sizes.power_min_duration_ms
    elif kind is RunKind.PERFORMANCE or kind.is_compliance:
        floors["min_duration"] = sizes.compared_min_duration_ms
        if scenario in sizes.compared_min_query_count:
            floors["min_query_count"] = sizes.compared_min_query_count[scenario]
    raised = dict(settings)
    for name, floor in floors.items():
        if kind is not RunKind.POWER and name in targets.extra:
            continue  # the campaign's own duration or count
        key = f"*.{scenario.loadgen}.{name}"
        raised[key] = max(int(settings.get(key, 0)), floor)
    return raised


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
