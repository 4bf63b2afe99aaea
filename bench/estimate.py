"""How long one planned run lasts: what LoadGen will really do, at the speed the host really has.

LoadGen's arithmetic is exact: the minimum durations and query counts of the run's settings (the
round's, or short mode's), the samples it issues for the targets it is given (Offline issues
1.1 x target_qps x min_duration samples), the whole dataset for an accuracy run. The host's speed
is the uncertain part: it comes from `bench.evidence` (tuned, else measured, else the targets
taken at their word), and the estimate carries that basis, so a person sees which figures are
guesses. Around LoadGen's time come the host's settle wait (hosts.yaml `settle_s`) and the
overhead of an attempt (container start, scoring, collection, verdict, hand-off), measured per
host from the store where it can be, else a constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from bench.evidence import Evidence
from bench.manifest import Manifest
from bench.measured import Basis, Measured
from bench.rules import RoundRules
from bench.run import RunKind, RunSpec, Scenario
from bench.settings import PerfTargets

RUN_OVERHEAD_S = 4.0  # container start, log collection, verdict: when the store has no figure
POWER_OVERHEAD_S = 25.0  # analyzer set-up and the pauses around ranging and testing
OFFICIAL_POWER_OVERHEAD_S = 45.0  # power-dev's own: NTP checks and its server's fixed sleeps
FALLBACK_QPS = 100.0
OFFLINE_SAMPLE_MARGIN = 1.1  # LoadGen issues 1.1 x target_qps x min_duration Offline samples
# LoadGen's minimum query counts where the round file gives none: mlperf.conf's (MultiStream
# 662) over LoadGen's built-in default of 100; early stopping, not the count, bounds the rest
LOADGEN_MIN_QUERIES = {Scenario.SINGLE_STREAM: 100, Scenario.MULTI_STREAM: 662,
                       Scenario.SERVER: 100, Scenario.INTERACTIVE: 100, Scenario.OFFLINE: 1}


@dataclass(frozen=True)
class Estimate:
    """A run's estimated wall time, what the host's speed came from, and what was assumed."""

    seconds: float
    basis: Basis
    note: str


def estimate_run(spec: RunSpec, manifest: Manifest, rules: RoundRules,
                 power_path: str | None, evidence: Evidence) -> Estimate:
    """The wall time of one attempt of the run, from its own settings (what LoadGen gets)."""
    own = evidence.figures(spec)
    offline = own if spec.scenario is Scenario.OFFLINE and own is not None and \
        own.samples_per_s else evidence.figures(spec, Scenario.OFFLINE)
    load = Load(spec.scenario, spec_targets(spec), own, offline)
    if spec.kind is RunKind.ACCURACY:
        load = replace(load, accuracy=evidence.accuracy_rate(spec))
        override = spec.settings.get(f"*.{spec.scenario.loadgen}.accuracy_sample_count_override")
        samples = manifest.dataset_size
        if isinstance(override, int) and 0 < override < samples:
            samples = override
        run_s, note, used = load.accuracy_s(samples)
    else:
        run_s, note, used = load.run_s(*minimums(spec, rules, manifest))
    overhead = evidence.overhead_s(spec)
    if spec.kind is RunKind.POWER:  # ranging, then testing
        run_s = 2 * run_s + (OFFICIAL_POWER_OVERHEAD_S if power_path == "official"
                             else POWER_OVERHEAD_S)
        overhead = None  # its session's pauses are in the constant above
    seconds = run_s + (RUN_OVERHEAD_S if overhead is None else overhead) \
        + evidence.settle_s.get(spec.host, 0.0)
    return Estimate(seconds, used.basis if used else Basis.DEFAULT, note)


def spec_targets(spec: RunSpec) -> PerfTargets:
    """The targets LoadGen is given, read back from the run's user.conf keys."""
    sc = spec.scenario.loadgen
    qps = spec.settings.get(f"*.{sc}.target_qps")
    latency = spec.settings.get(f"*.{sc}.target_latency") \
        if spec.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM) else None
    return PerfTargets(target_qps=float(qps) if isinstance(qps, int | float) and qps > 0
                       else None,
                       target_latency_ms=float(latency) if isinstance(latency, int | float)
                       and latency > 0 else None)


def minimums(spec: RunSpec, rules: RoundRules, manifest: Manifest) -> tuple[float, int]:
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


Timed = tuple[float, str, Measured | None]  # seconds, note, the figures it rests on


@dataclass(frozen=True)
class Load:
    """How LoadGen loads a scenario (the targets it is given) and how fast the host really is
    (tuned or measured, when known): together they give a run's length."""

    scenario: Scenario
    targets: PerfTargets
    measured: Measured | None = None  # this scenario's figures
    offline: Measured | None = None  # the host's Offline throughput, the ceiling of Server
    accuracy: Measured | None = None  # the rate of this scenario's last accuracy run

    def run_s(self, min_duration_s: float, min_queries: int) -> Timed:
        """Seconds one performance-mode run lasts, what the figure rests on, and which
        figures were used."""
        if self.scenario is Scenario.OFFLINE:
            return self._offline_s(min_duration_s, min_queries)
        if self.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
            return self._stream_s(min_duration_s, min_queries)
        return self._server_s(min_duration_s, min_queries)

    def accuracy_s(self, dataset_size: int) -> Timed:
        """Seconds an accuracy run lasts: every sample of the dataset once. An accuracy run of
        the scenario says it best; else a stream scenario's queries one after another at its
        latency, an Offline or Server one at the measured rate."""
        per_query = 8 if self.scenario is Scenario.MULTI_STREAM else 1
        if self.accuracy and self.accuracy.samples_per_s:
            return dataset_size / self.accuracy.samples_per_s, _by(self.accuracy), self.accuracy
        stream = self.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM)
        if stream and self.measured and self.measured.latency_s:
            return dataset_size / per_query * self.measured.latency_s, _by(self.measured), \
                self.measured
        for figures in (self.measured, None if stream else self.offline):
            if figures and figures.samples_per_s:
                return dataset_size / figures.samples_per_s, _by(figures), figures
        rate, note = self._target_rate()
        return dataset_size / (rate * per_query), note, None

    def _offline_s(self, min_duration_s: float, min_samples: int) -> Timed:
        target, note = self._target_rate()
        samples = max(min_samples, math.ceil(OFFLINE_SAMPLE_MARGIN * target * min_duration_s))
        measured = self.measured
        if measured is None or not measured.samples_per_s:
            return samples / target, note, None
        rate = measured.samples_per_s
        seconds = samples / rate
        if rate < target:
            return seconds, (f"Offline target_qps {target:g} is above the {rate:.0f} samples/s "
                             f"{_by(measured)}: LoadGen issues {samples} samples, so the run "
                             f"lasts {seconds:.0f} s; set target_qps near {rate:.0f} for a run "
                             "of the minimum duration"), measured
        return seconds, _by(measured), measured

    def _stream_s(self, min_duration_s: float, min_queries: int) -> Timed:
        # one query at a time until both the minimum duration and the minimum count are met
        target, note = self._target_rate()
        measured = self.measured
        if measured is None or not measured.latency_s:
            return max(min_duration_s, min_queries / target), note, None
        return max(min_duration_s, min_queries * measured.latency_s), _by(measured), measured

    def _server_s(self, min_duration_s: float, min_queries: int) -> Timed:
        target, note = self._target_rate()
        queries = max(min_queries, math.ceil(target * min_duration_s))
        schedule_s = queries / target
        tuned = self.measured if self.measured and self.measured.basis is Basis.TUNED else None
        ceiling = tuned if tuned and tuned.samples_per_s else self.offline
        if ceiling is not None and ceiling.samples_per_s and ceiling.samples_per_s < target:
            seconds = queries / ceiling.samples_per_s
            return seconds, (f"{self.scenario.value} target_qps {target:g} is above the "
                             f"{ceiling.samples_per_s:.0f} samples/s {_by(ceiling)}: the queue "
                             f"grows, the run lasts about {seconds:.0f} s and will be INVALID"), \
                ceiling
        # the schedule decides; what was measured says the host keeps up with it
        used = self.measured or (ceiling if ceiling and ceiling.samples_per_s else None)
        return schedule_s, note if used is None else _by(used), used

    def _target_rate(self) -> tuple[float, str]:
        """Queries per second LoadGen is told to expect, and what had to be assumed."""
        if self.scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM) \
                and self.targets.target_latency_ms:
            return 1000.0 / self.targets.target_latency_ms, ""
        if self.targets.target_qps:
            return self.targets.target_qps, ""
        return FALLBACK_QPS, f"no expected QPS/latency given: assumed {FALLBACK_QPS:g} queries/s"


def _by(figures: Measured) -> str:
    verb = "found by" if figures.basis is Basis.TUNED else "measured by"
    return f"{verb} {figures.source}"
