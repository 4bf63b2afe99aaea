"""Execute one planned run to a judged record: new attempt, reattachment, automatic re-runs.

A finished run is never repeated: its key finds it in the run store. An attempt still marked
running is reattached by its container label or native process name (after a dropped link or a
controller crash) and collected, not started again. A command cut by a dropped link
(ConnectionLost) is absorbed here: the next call reconnects (the host's outage budget bounds how
long) and the attempt is reattached, so a flaky link costs time, never a run. A link that stays
down past one reconnection window (LinkDown) or for the whole budget (HostUnreachable) leaves the
attempt running and propagates: the caller may retry later, which reattaches. An INVALID run whose
verdict proposes new settings is re-run as a new attempt, up to the campaign's bound; a
compliance test always runs at the load of the performance attempt it is compared with
(`compared_spec`), never at settings of its own. Every new attempt starts after the host's
settle time (counted from the end of the host's last run), so one run's heat and caches do
not flow into the next. Compliance tests are not re-run here: bench.settle decides which run
of a set to repeat.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench import target as remote
from bench import telemetry
from bench.compliance import ComplianceResult, References, verify
from bench.loadgen_log import locate_logs
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import Mode, RunKind, RunRecord, RunSpec, RunState
from bench.settings import audit_config, compared_settings, user_conf
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunHandle, RunTarget
from bench.training_verdict import judge_training
from bench.verdict import judge_dir
from lab.errors import (
    CollectionRefused,
    ConnectionLost,
    RunCancelled,
    SubrunError,
    is_link_fault,
)

log = logging.getLogger("subrun.runs")


@dataclass(frozen=True)
class ExecuteOptions:
    """Bounds of one run's execution."""

    max_reruns: int = 2
    min_timeout_s: float = 300.0
    timeout_factor: float = 5.0  # an attempt may take this many times its estimate
    again: bool = False  # measure once more even if the run already has a finished attempt


def execute(target: RunTarget, planned: PlannedRun, store: RunStore, rules: RoundRules, *,
            references: Mapping[RunKind, RunRecord] | None = None,
            options: ExecuteOptions | None = None) -> RunRecord:
    """Bring the run to a final record: reuse, reattach, run, and re-run within the bound."""
    options = options or ExecuteOptions()
    timeout_s = max(options.min_timeout_s, planned.estimate_s * options.timeout_factor)
    latest = store.latest(planned.spec.key)
    again: RunSpec | None = None  # a measurement asked for once more, with this spec
    if options.again and latest is not None and latest.state != RunState.RUNNING:
        if not may_measure_again(store.attempts(latest.key), options.max_reruns):
            return latest
        again = (compared_spec(planned, references) if planned.spec.kind.is_compliance
                 else (store.standing(latest.key) or latest).spec)
    cuts = 0
    while True:
        try:
            if again is not None:  # inside the loop: a cut in it is reattached like any
                spec, again = again, None
                latest = _new_attempt(target, spec, planned.spec.key, store, rules, references,
                                      timeout_s)
            elif latest is None:
                latest = _new_attempt(target, compared_spec(planned, references),
                                      planned.spec.key, store, rules, references, timeout_s)
            elif latest.state == RunState.RUNNING:
                latest = _reattach(target, latest, store, rules, references, timeout_s)
            elif passed(latest) or not _may_rerun(store, latest, options):
                return latest
            else:
                spec = compared_spec(planned, references) if planned.spec.kind.is_compliance \
                    else _rerun_spec(latest)
                latest = _new_attempt(target, spec, latest.key, store, rules, references,
                                      timeout_s)
        except ConnectionLost as e:  # the attempt stays running: reconnect and reattach
            cuts += 1
            if cuts > MAX_CUTS:
                raise
            log.warning("%s: %s Reattaching.", planned.label, e)
            latest = store.latest(planned.spec.key)


def compared_spec(planned: PlannedRun,
                  references: Mapping[RunKind, RunRecord] | None) -> RunSpec:
    """The spec a run's next attempt executes: the plan's, except that a compliance test runs
    at the load of the performance attempt it is compared with (its target x the test's
    derate), not at the plan's target, which a re-run of the reference may have moved."""
    reference = (references or {}).get(RunKind.PERFORMANCE)
    if not planned.spec.kind.is_compliance or reference is None:
        return planned.spec
    settings = compared_settings(planned.spec.settings, reference.spec.settings,
                                 planned.spec.scenario, planned.derate)
    return planned.spec.model_copy(update={"settings": settings})


def _unless_cancelled(target: RunTarget, spec: RunSpec) -> None:
    if target.is_cancelled:
        raise RunCancelled(f"{spec.label}: the campaign '{target.campaign}' was cancelled; "
                           "the run runs again when the campaign starts again.")



# Cuts absorbed in one call: the host's outage budget bounds a link that stays down; this only
# stops a step that is cut every time it runs from looping for ever (the caller retries later).
MAX_CUTS = 100
MAX_LOST_ATTEMPTS = 3  # attempts that never ran (killed before start) beyond max_reruns


def measured_attempts(attempts: list[RunRecord]) -> int:
    """Attempts that really ran on the target: neither lost nor a re-verification."""
    return sum(not a.state.ended_unjudged and a.reverifies is None for a in attempts)


def may_measure_again(attempts: list[RunRecord], max_reruns: int) -> bool:
    """Whether the campaign's re-run bound leaves room for one more measurement."""
    return measured_attempts(attempts) <= max_reruns


def _may_rerun(store: RunStore, record: RunRecord, options: ExecuteOptions) -> bool:
    """Lost attempts (never ran, or never collected) are run again, a few times at most;
    attempts that ran count against the campaign's re-run bound, and only an INVALID run whose
    verdict proposes new settings is re-run here."""
    attempts = store.attempts(record.key)
    if record.state.ended_unjudged:  # never judged: run again, a few times at most
        return sum(a.state.ended_unjudged for a in attempts) <= MAX_LOST_ATTEMPTS
    verdict = record.verdict
    return (not record.spec.kind.is_compliance  # its load is its reference's: bench.settle
            and may_measure_again(attempts, options.max_reruns) and verdict is not None
            and verdict.rerun_settings is not None)


def _rerun_spec(record: RunRecord) -> RunSpec:
    adjusted = record.verdict.rerun_settings if record.verdict else None
    if not adjusted:
        return record.spec
    return record.spec.model_copy(update={"settings": {**record.spec.settings, **adjusted}})


def run_files(spec: RunSpec, rules: RoundRules) -> dict[str, str]:
    """The files a run's directory starts with: user.conf, and audit.config only for a test
    (nothing for a training run: its seed is in its argv)."""
    if spec.kind is RunKind.TRAINING:
        return {}
    files = {"user.conf": user_conf(spec.settings, spec.mode, header=f"subrun {spec.label}")}
    if spec.kind.is_compliance:
        files["audit.config"] = audit_config(spec.kind, spec.model, rules,
                                             sampling_share=short_share(spec, rules))
    return files


def short_share(spec: RunSpec, rules: RoundRules) -> float:
    """How long a short run is against the round's minimum duration (1.0 in submission mode)."""
    duration = spec.settings.get(f"*.{spec.scenario.loadgen}.min_duration")
    if spec.mode is not Mode.SHORT or not isinstance(duration, int | float) or duration <= 0:
        return 1.0
    return min(1.0, float(duration) / rules.min_duration_ms)


def _new_attempt(target: RunTarget, spec: RunSpec, key: str, store: RunStore,
                 rules: RoundRules, references: Mapping[RunKind, RunRecord] | None,
                 timeout_s: float) -> RunRecord:
    # the host has been idle since its last run's workload ended (collecting it, judging it
    # and handing the host over load it no more than the wait does): only the rest is waited
    settle_s = target.config.settle_s
    if settle_s:
        settle_s = max(0.0, settle_s - remote.idle_s(target))
    time.sleep(settle_s)
    _unless_cancelled(target, spec)  # nothing new starts once the campaign is cancelled
    record = store.start_attempt(spec, key=key)
    record = store.update(key, record.attempt, settle_s=settle_s)
    try:
        handle = remote.start(target, record, run_files(spec, rules))
    except SubrunError as e:
        if is_link_fault(e):
            raise  # the attempt stays running: a retry reattaches if the container did start
        return store.update(record.key, record.attempt, state=RunState.FAILED, error=str(e),
                            finished_at=datetime.now(UTC))
    log.info("%s: attempt %d started on host '%s' (%s %s)", spec.label, record.attempt,
             target.config.name, target.runner.what, handle.name)
    return _finish(target, record, handle, store, rules, references, timeout_s)


def _reattach(target: RunTarget, record: RunRecord, store: RunStore, rules: RoundRules,
              references: Mapping[RunKind, RunRecord] | None, timeout_s: float) -> RunRecord:
    if record.files:  # collected before the controller or the link stopped: judge what is
        left = remote.find(target, record)  # stored, once what is left on the target is gone
        if left is not None:
            remote.discard(target, left)
        return judge_collected(record, store, rules, references, target)
    handle = remote.find(target, record)
    if handle is None:
        _forget_unstarted(target, record)
        return store.update(record.key, record.attempt, state=RunState.LOST,
                            finished_at=datetime.now(UTC),
                            error=f"Attempt {record.attempt} of {record.spec.label} was marked "
                                  f"running, but its {target.runner.what} is gone from the target; "
                                  "its results could not be collected.")
    log.info("%s: reattached to attempt %d on host '%s' (%s %s)", record.spec.label,
             record.attempt, target.config.name, target.runner.what, handle.name)
    return _finish(target, record, handle, store, rules, references, timeout_s)


def _forget_unstarted(target: RunTarget, record: RunRecord) -> None:
    """A lost attempt's directory would show as left on the host in `subrun status`."""
    try:
        if not remote.forget_unstarted(target, record):
            log.warning("%s: attempt %d's run directory on host '%s' holds output of a run "
                        "nobody collected; it is left there", record.spec.label,
                        record.attempt, target.config.name)
    except SubrunError as e:  # a cut link: the folder stays, the attempt is lost either way
        log.warning("%s: attempt %d's run directory on host '%s' not removed: %s",
                    record.spec.label, record.attempt, target.config.name, e)


def _finish(target: RunTarget, record: RunRecord, handle: RunHandle, store: RunStore,
            rules: RoundRules, references: Mapping[RunKind, RunRecord] | None,
            timeout_s: float) -> RunRecord:
    """Wait, collect into the store (with the exit status), only then clean the target, judge."""
    key, attempt, spec = record.key, record.attempt, record.spec
    telemetry.begin(target, handle)  # a host sampler beside the run, until it is collected
    status = remote.wait(target, handle, timeout_s)
    _unless_cancelled(target, spec)  # the canceller stopped it and records it cancelled
    try:
        with tempfile.TemporaryDirectory(prefix="subrun-collect-") as tmp:
            tail = remote.collect(target, handle, Path(tmp)) or _loadgen_tail(Path(tmp))
            store.add_files(key, attempt, Path(tmp))
    except CollectionRefused as e:
        return _refused(target, record, handle, store, e)
    error = ""
    if status.running or status.exit_status != 0:
        why = (f"did not finish within {timeout_s:.0f} s and was stopped" if status.running
               else f"exited with status {status.exit_status}"
               + (" (killed: out of memory)" if status.oom_killed else "")
               + (f": {status.error}" if status.error else ""))
        error = (f"The {target.runner.what} of {spec.label} on host '{target.config.name}' "
                 f"{why}. Its output tail is kept in the run record.")
    record = store.update(key, attempt, log_tail=tail, error=error,
                          exit_status=-1 if status.running else status.exit_status)
    remote.discard(target, handle)
    for line in tail.splitlines():
        log.info("%s | %s", spec.label, line)
    return judge_collected(record, store, rules, references, target)


def _refused(target: RunTarget, record: RunRecord, handle: RunHandle, store: RunStore,
             refusal: CollectionRefused) -> RunRecord:
    """A hostile or malformed run directory fails the attempt for good: recorded with the
    reason, the target cleaned, nothing retried or re-run."""
    log.warning("%s: %s", record.spec.label, refusal)
    failed = store.update(record.key, record.attempt, state=RunState.FAILED, error=str(refusal),
                          finished_at=datetime.now(UTC))
    remote.discard(target, handle)
    return failed


def judge_collected(record: RunRecord, store: RunStore, rules: RoundRules,
                    references: Mapping[RunKind, RunRecord] | None,
                    target: RunTarget | None = None) -> RunRecord:
    """The final record of a collected attempt: failed with its error, or judged (a
    compliance test verified against references, the attempts it names in its record; a
    wrapped run, e.g. power-dev's, by its wrapper's check as well)."""
    record = telemetry.judge(store, record)  # a flagged run warns; it is never failed for it
    key, attempt, spec = record.key, record.attempt, record.spec
    done = datetime.now(UTC)
    if record.error or record.exit_status not in (0, None):
        return store.update(key, attempt, state=RunState.FAILED, finished_at=done)
    compliance, used = None, {}
    if spec.kind.is_compliance:
        compliance = _stored_verification(store, record)
        if compliance is None:
            compliance = _verify(spec, store, key, attempt, references)
            used = {k.value: r.attempt for k, r in (references or {}).items()}
    verdict = judge_training(spec, store.path(key, attempt)) if spec.kind is RunKind.TRAINING \
        else judge_dir(spec, store.path(key, attempt), rules, compliance=compliance)
    if target is not None and target.wrap is not None:  # e.g. power-dev's check of its output
        verdict = target.wrap.judge(store, record, verdict)
    return store.update(key, attempt, state=RunState.FINISHED, finished_at=done, exit_status=0,
                        verdict=verdict, **({"references": used} if used else {}))


def reverify(store: RunStore, record: RunRecord, rules: RoundRules,
             references: Mapping[RunKind, RunRecord]) -> RunRecord:
    """Verify the logs a compliance attempt collected against other reference attempts, as a
    new attempt of the test: its LoadGen logs are copied, never run again, and its record names
    the attempt it re-verifies and the references it was verified against."""
    source = store.path(record.key, record.attempt)
    fresh = store.start_attempt(record.spec, key=record.key)
    with tempfile.TemporaryDirectory(prefix="subrun-reverify-") as tmp:
        for name in record.files:
            if not name.startswith("verify_"):
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / name, Path(tmp) / name)
        store.add_files(record.key, fresh.attempt, Path(tmp))
    store.update(record.key, fresh.attempt, reverifies=record.attempt,
                 log_tail=record.log_tail, exit_status=record.exit_status)
    log.info("%s: attempt %d re-verifies the logs of attempt %d against %s",
             record.spec.label, fresh.attempt, record.attempt,
             ", ".join(f"{k.value} attempt {r.attempt}" for k, r in references.items()))
    return judge_collected(store.record(record.key, fresh.attempt), store, rules, references)


def _stored_verification(store: RunStore, record: RunRecord) -> ComplianceResult | None:
    """The verification an earlier controller already wrote into the attempt, if any."""
    folder = store.path(record.key, record.attempt)
    texts = {n: (folder / n).read_text() for n in record.files if n.startswith("verify_")}
    if not texts:
        return None
    failing = {n: t for n, t in texts.items() if "TEST PASS" not in t}
    reason = "; ".join(f"{n}: {(t.strip().splitlines() or [''])[-1]}"
                       for n, t in failing.items())
    return ComplianceResult(test=record.spec.kind, passed=not failing, reason=reason)


def _loadgen_tail(collected: Path, lines: int = 20) -> str:
    """When the harness printed nothing, the end of LoadGen's detail log tells most."""
    detail = locate_logs(collected) / "mlperf_log_detail.txt"
    if not detail.is_file():
        return "(the container printed nothing and left no LoadGen log)"
    with detail.open("rb") as f:  # only its end: a detail log may be large
        f.seek(max(0, f.seek(0, 2) - 64 * 1024))
        text = f.read().decode(errors="replace").splitlines()[-lines:]
    return "(the container printed nothing; the end of mlperf_log_detail.txt)\n" + "\n".join(text)


def _verify(spec: RunSpec, store: RunStore, key: str, attempt: int,
            references: Mapping[RunKind, RunRecord] | None) -> ComplianceResult:
    refs = references or {}
    perf = refs.get(RunKind.PERFORMANCE)
    acc = refs.get(RunKind.ACCURACY)
    if perf is None or (spec.kind is RunKind.TEST01 and acc is None):
        return ComplianceResult(test=spec.kind, passed=False,
                                reason=f"{spec.kind} compares against the performance (and, for "
                                       "TEST01, accuracy) run of the same scenario, which did "
                                       "not pass.",
                                fix="Make the reference runs pass first, then re-run the test.")
    folder = store.path(key, attempt)
    references_dirs = References(
        performance_dir=locate_logs(store.path(perf.key, perf.attempt)),
        accuracy_dir=locate_logs(store.path(acc.key, acc.attempt)) if acc else None)
    with tempfile.TemporaryDirectory(prefix="subrun-verify-") as tmp:
        result = verify(spec.kind, locate_logs(folder), references_dirs, Path(tmp))
        produced = Path(result.output_dir)
        keep = Path(tmp) / "keep"
        keep.mkdir()
        for item in produced.glob("*.txt"):
            (keep / item.name).write_bytes(item.read_bytes())
        store.add_files(key, attempt, keep)
    return result
