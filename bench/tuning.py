"""The tuning step: probe runs on the target until the search (bench.tune_search) stops.

A probe is a run like any other: a `tuning` run in the campaign's run store, started detached
in the benchmark's container through `bench.execute` (so it is reattached after a dropped link
or a killed controller, collected, and its record judged), with the value the search asks for
and a minimum duration long enough to be trusted. Its figures come from LoadGen's summary:
VALID or not, samples/s, the latency percentile the scenario reports. An INVALID probe is
information, not a failure: a tuning run's verdict asks only that LoadGen ran cleanly (its
scenario, seeds, no LoadGen error), and it is never re-run with new settings.

An Offline search first sizes itself (`_sized`): a probe of SIZING_S at its start value
measures the host's rate, and its first probe runs there, so it lasts about the probe length
whatever the manifest's default.

Each probe lands in the TuningBook the moment it is judged, so a search killed at any point
continues, when started again, from the probes recorded (the next step is a function of them).
A probe cut off with its controller is reattached, being the same step with the same settings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.campaign import Campaign
from bench.estimate import OFFLINE_SAMPLE_MARGIN
from bench.execute import ExecuteOptions, execute
from bench.loadgen_log import DETAIL, SUMMARY, locate_logs, read_detail, read_summary
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import Mode, RunKind, RunRecord, RunSpec, Scenario, Setting
from bench.settings import PerfTargets, ShortMode, run_settings
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunTarget
from bench.tune_search import SERVER_LIKE, SearchConfig, Stop, next_step, tuned_key
from bench.tuning_record import Probe, TuningBook, TuningKey, TuningRecord
from lab.errors import RunError

log = logging.getLogger("subrun.tuning")

PROBE_S = {Mode.SHORT: 10.0, Mode.SUBMISSION: 60.0}  # a probe's minimum duration by mode
PROBE_OVERHEAD_S = 10.0  # container start, warm-up, collection: for the probe's time-out
MAX_STRETCH = 4.0  # the longest a Server probe may last, in its minimum durations
CONFIRM_MAX_S = 120.0  # a confirmation lasts the official run's minimum duration, up to this
PROBE_REPEATS = 1000  # attempts one probe key may have across searches of one run store
# an Offline search's first probe runs at the rate a probe this long measured: LoadGen issues
# 1.1 x target_qps x min_duration samples, so a probe at a target far above the host's rate
# lasts far longer than its minimum duration, one far below it ends before it (INVALID)
SIZING_S = 1.0
# what a probe sets itself: the run's own durations and counts never reach a probe
OWN_KEYS = ("min_duration", "max_duration", "min_query_count", "max_query_count")


@dataclass(frozen=True)
class TuneJob:
    """One search: its key, where it starts, and the scenario's other settings."""

    key: TuningKey
    start: float  # the first target_qps (target_latency in ms for the streams)
    model: str  # the official model, for the probe's RunSpec
    targets: PerfTargets  # the scenario's other settings (the campaign's over the manifest's)
    fresh: bool = False  # begin a new search in place of the record the key has
    campaign: str = ""
    config: SearchConfig = field(default_factory=SearchConfig)
    probe_s: float = PROBE_S[Mode.SHORT]


def search_config(campaign: Campaign, scenario: Scenario,
                  run_s: float | None = None) -> SearchConfig:
    """The campaign's resolution and margin, and a confirmation as long as the official run
    (run_s, its minimum duration; None: its mode's); a Server search goes no lower than the
    load at which LoadGen's minimum query count (short mode's) stretches a probe past
    MAX_STRETCH times its duration: below it each probe costs minutes and tells what the noise
    does."""
    queries = ShortMode().min_query_count.get(scenario, 1)
    return SearchConfig(resolution=campaign.tune_resolution, margin=campaign.tune_margin,
                        min_qps=max(0.5, queries / (MAX_STRETCH * probe_seconds(campaign))),
                        confirm_s=confirm_seconds(campaign, run_s))


def confirm_seconds(campaign: Campaign, run_s: float | None = None) -> float:
    """A confirmation's minimum duration: the campaign's `tune_confirm_s`, else the official
    run's (short mode's second unless its settings set one; submission mode's ten minutes)
    up to CONFIRM_MAX_S, and never shorter than a probe."""
    if campaign.tune_confirm_s:
        return campaign.tune_confirm_s
    if run_s is None:
        run_s = ShortMode().min_duration_ms / 1000 if campaign.mode is Mode.SHORT \
            else CONFIRM_MAX_S
    return max(probe_seconds(campaign), min(run_s, CONFIRM_MAX_S))


def probe_seconds(campaign: Campaign) -> float:
    """A probe's minimum duration: the campaign's `tune_probe_s`, else its mode's."""
    return campaign.tune_probe_s or PROBE_S[campaign.mode]


def probe_spec(job: TuneJob, value: float, seconds: float | None = None) -> RunSpec:
    """The run of one probe at value lasting seconds (None: the job's probe length); always
    short mode: a probe is never submitted. An Offline probe's minimum duration is its length
    over LoadGen's 1.1 (it issues 1.1 x target_qps x min_duration samples): at a target the
    host sustains it lasts its length, and a host up to 1.1 x faster still meets the minimum,
    so a host that slows to 70 % of the sizing's rate (a busy neighbour on its core) makes
    it last 1.43 x its length, not 1.57 x."""
    scenario = job.key.scenario
    extra = {k: v for k, v in job.targets.extra.items() if k.rsplit(".", 1)[-1] not in OWN_KEYS}
    targets = PerfTargets(target_qps=None if scenario in _STREAMS else value,
                          target_latency_ms=value if scenario in _STREAMS else None,
                          extra=extra)
    length_ms = (seconds or job.probe_s) * 1000
    if scenario is Scenario.OFFLINE:  # LoadGen's slack inside the probe's length, not beyond it
        length_ms /= OFFLINE_SAMPLE_MARGIN
    settings = run_settings(scenario, Mode.SHORT, targets,
                            ShortMode(min_duration_ms=round(length_ms)))
    return RunSpec(host=job.key.host, benchmark=job.key.benchmark, model=job.model,
                   scenario=scenario, kind=RunKind.TUNING, mode=Mode.SHORT,
                   round=job.key.round, settings=settings, image_digest=job.key.image_digest,
                   loadgen_version=job.key.loadgen_version)


_STREAMS = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM)
Around = Callable[[str], AbstractContextManager[object]]
OnProbe = Callable[[TuningRecord, Probe], None]


def tune(target: RunTarget, job: TuneJob, book: TuningBook, store: RunStore, rules: RoundRules,
         *, around: Around | None = None, on_probe: OnProbe | None = None) -> TuningRecord:
    """Run the search of one key to its end and return its finished record. around(label)
    wraps each probe (the host's slot); on_probe hears each probe as it lands."""
    key, scenario = job.key, job.key.scenario
    record = book.find(key)
    if job.fresh or record is None:
        record = book.begin(key, job.campaign)
    elif record.done:
        return record
    if scenario is Scenario.OFFLINE and not record.probes:
        job = _sized(target, job, store, rules, around or _nothing)
    while not isinstance(step := next_step(scenario, record.probes, job.start, job.config),
                         Stop):
        log.info("%s: probe %d at %s %g (%s)", key, len(record.probes) + 1,
                 tuned_key(scenario), step.value, step.why)
        with (around or _nothing)(f"{key.host}/{key.benchmark}/{scenario.value} "
                                  f"{step.value:g}"):
            probe = run_probe(target, job, step.value, store, rules, seconds=step.seconds) \
                .model_copy(update={"confirm": step.confirm})
        record = book.add_probe(key, probe)
        if on_probe is not None:
            on_probe(record, probe)
    chosen: dict[str, Setting] = {tuned_key(scenario): step.chosen} if step.chosen else {}
    log.info("%s: %s; chosen %s", key, step.why, chosen or "nothing")
    return book.finish(key, chosen=chosen, found=step.found, margin=job.config.margin,
                       resolution=job.config.resolution if scenario in SERVER_LIKE else None)


def _sized(target: RunTarget, job: TuneJob, store: RunStore, rules: RoundRules,
           around: Around) -> TuneJob:
    """The Offline search starting at the rate a SIZING_S probe at its start measured, so
    that its probes last about their minimum duration whatever the start; the sizing probe
    is not one of the search's (a search started again sizes itself again)."""
    key = job.key
    with around(f"{key.host}/{key.benchmark}/{key.scenario.value} sizing {job.start:g}"):
        probe = run_probe(target, job, job.start, store, rules, seconds=SIZING_S)
    if not probe.samples_per_s:
        return job
    log.info("%s: a %g-s sizing probe at target_qps %g ran %.1f samples/s in %.1f s: the "
             "search starts there", key, SIZING_S, job.start, probe.samples_per_s,
             probe.duration_s)
    return replace(job, start=probe.samples_per_s)


def run_probe(target: RunTarget, job: TuneJob, value: float, store: RunStore,
              rules: RoundRules, *, seconds: float | None = None) -> Probe:
    """One probe at value lasting seconds (None: the job's probe length), through the runner
    every run takes; a probe of these settings still running on the target (a controller
    killed mid-probe) is reattached."""
    spec = probe_spec(job, value, seconds)
    run = execute(target, PlannedRun(spec, (seconds or job.probe_s) + PROBE_OVERHEAD_S),
                  store, rules,
                  options=ExecuteOptions(max_reruns=PROBE_REPEATS, again=True))
    return read_probe(run, store.path(run.key, run.attempt))


def _nothing(label: str) -> AbstractContextManager[object]:
    return nullcontext()


def read_probe(run: RunRecord, folder: Path) -> Probe:
    """A probe's figures from LoadGen's summary of its run; RunError when the run failed."""
    if not passed(run):
        why = run.error or (run.verdict.reason if run.verdict else "") or run.state.value
        raise RunError(f"Tuning probe {run.spec.label} ({_value(run.spec)}) did not run "
                       f"cleanly: {why}. Its logs are in {folder}; fix the run, then tune again "
                       "(the probes already recorded are kept).")
    logs = locate_logs(folder)
    summary = read_summary(logs / SUMMARY)
    fields = summary.fields
    scenario = run.spec.scenario
    rate = "Completed samples per second" if scenario in SERVER_LIKE else "Samples per second"
    if scenario in SERVER_LIKE:
        share = read_detail(logs / DETAIL, keys=("effective_target_latency_percentile",)) \
            .effective.get("target_latency_percentile", 0.99)
        latency = _number(fields, rf"{float(share) * 100:.2f} percentile latency \(ns\)")
    else:  # the percentile the scenario reports (90th SingleStream, 99th MultiStream)
        latency = _number(fields, r"[\d.]+th percentile latency \(ns\)")
    finished = run.finished_at or datetime.now(UTC)
    return Probe(settings=dict(run.spec.settings), valid=summary.valid,
                 samples_per_s=_number(fields, re.escape(rate)), latency_ns=latency,
                 mean_latency_ns=_number(fields, r"Mean latency \(ns\)"),
                 latency_bound_ns=_number(fields, r"target_latency \(ns\)")
                 if scenario in SERVER_LIKE else None,
                 duration_s=(finished - run.started_at).total_seconds() + run.settle_s,
                 at=finished, attempt=f"{run.key}/attempt-{run.attempt}")


def _number(fields: dict[str, str], name: str) -> float | None:
    for key, value in fields.items():
        if re.fullmatch(name, key):
            try:
                found = float(value)
            except ValueError:
                return None
            return found if found > 0 else None
    return None


def _value(spec: RunSpec) -> str:
    key = tuned_key(spec.scenario)
    return f"{key} {spec.settings.get(key, '?')}"
