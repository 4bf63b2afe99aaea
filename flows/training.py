"""The `training` flow: provision, describe, seeded runs per system, package, official checks.

Hosts (systems) work in parallel; each runs its training runs one at a time, holding the host's
slot as inference runs do, so a SUT measures one run at a time whichever campaign asks. Every run
is detached and reattachable (`bench.execute`); a finished run is found in the store by key and
never repeated, so a killed campaign started again runs every seed exactly once. After each run
its verdict, time to train, epochs, the set's running olympic score and its RCP status are
logged and sent to progress listeners. The flow run is Completed only when every run passed and
the official package checker passed.
"""

from __future__ import annotations

from contextlib import ExitStack, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.context import FlowRunContext
from prefect.futures import PrefectFuture, wait
from prefect.logging.loggers import flow_run_logger
from prefect.runtime import flow_run as current_run
from prefect.states import Cancelled, Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import allow_failure, quote

from bench.campaign import Campaign
from bench.plan import PlannedRun
from flows import events
from flows import training_steps as steps
from flows.cancellation import CancelWatch, cancelled_end
from flows.context import resolve_campaign
from flows.holders import Holder, server_in_use
from flows.outcome import TrainingOutcome
from flows.progress import CampaignProgress
from flows.slots import held, slot_names
from flows.steps import host_leases
from flows.submission import RETRY, reachable
from lab.errors import HostUnreachable, RunCancelled
from submission.history import plot_trends, record_training


@task(name="provision", **RETRY)  # type: ignore[call-overload]
def provision_task(ctx: steps.TrainingContext, host: str) -> dict[str, Any]:
    return steps.provision_host(ctx, host)


@task(name="describe", **RETRY)  # type: ignore[call-overload]
def describe_task(ctx: steps.TrainingContext, host: str, images: dict[str, Any]) -> Any:
    return steps.describe(ctx, host, images)


@task(name="train", task_run_name="{planned.label}", **RETRY)  # type: ignore[call-overload]
def train_task(ctx: steps.TrainingContext, planned: PlannedRun, images: dict[str, Any],
               progress: CampaignProgress, holder: Holder, hold_host: bool = True) -> State[Any]:
    """One seeded run; it holds its host's slot unless its set holds the whole host."""
    logger = get_run_logger()

    def waiting(why: str) -> None:
        logger.info("%s: %s", planned.label, why)
        progress.waiting(planned.label, why)

    me = replace(holder, run=planned.label, run_s=planned.estimate_s)
    slots = slot_names(planned.spec.host, None) if hold_host else []
    try:
        leases = host_leases(ctx, planned.spec.host) if hold_host else []
        with held(slots, me, waiting, ctx.cancelled, leases):
            record = steps.run(ctx, planned, images)
    except RunCancelled as e:
        progress.finished(planned.label, "cancelled")
        return Cancelled(message=str(e))
    except HostUnreachable as e:
        logger.warning("%s: not run: %s", planned.label, e)
        progress.finished(planned.label, "not run")
        raise
    found = steps.feedback(ctx, planned, record)
    text = f"{found.line} | {found.standing} | RCP {found.rcp.state}: {found.rcp.message}"
    (logger.info if found.passed else logger.warning)("%s: %s", planned.label, text)
    progress.finished(f"{planned.label}: {text}", "passed" if found.passed else "failed")
    return Completed(data=found) if found.passed else Failed(data=found, message=text)


def stop_runs_in_flight(flow: Any, flow_run: Any, state: Any) -> None:
    """When the flow run is cancelled: stop its training runs on the targets, keep their logs,
    and record them cancelled."""
    params = flow_run.parameters or {}
    given = params.get("campaign")
    campaign = Campaign.model_validate(given) if isinstance(given, dict) else given
    ctx = steps.load_training_context(resolve_campaign(params.get("campaign_file"), campaign))
    try:
        for record in steps.cancel_runs(ctx):
            flow_run_logger(flow_run).info("cancelled %s (attempt %s)", record.spec.label,
                                           record.attempt)
    finally:
        ctx.close()


@flow(name="training", log_prints=True, on_cancellation=[stop_runs_in_flight],
      task_runner=ThreadPoolTaskRunner(max_workers=16))  # type: ignore[arg-type]
def training(campaign_file: str | None = None, campaign: Campaign | None = None,
             track_history: bool = False) -> State[Any]:
    """Run a training campaign and check its package with mlperf-logging's package checker.

    Its result is the campaign's summary: runs, failures, each system's olympic score next to
    result_summarizer's, and the package checker's verdict. With track_history (nightly), each
    system's time to train joins the history, its trends are plotted, and a regression is an
    event, as for inference."""
    ctx = steps.load_training_context(resolve_campaign(campaign_file, campaign))
    watch = _watch(ctx)
    try:
        with watch.on_interrupt() if watch else nullcontext():
            summary = _campaign(ctx)
        if summary is None:
            return cancelled_end(watch, f"training campaign {ctx.campaign.name}", ctx.store,
                                 "runs their seeds again and repeats no finished run")
        if track_history:
            _track(ctx, summary)
    finally:
        if watch is not None:
            watch.stop()
        ctx.close()
    state = Completed if summary.all_passed else Failed
    return state(data=summary, message=summary.message)


def _watch(ctx: steps.TrainingContext) -> CancelWatch | None:
    """Watch the flow run a user cancels (this one, or the `submission` flow run a deployment
    started, of which this is a subflow) when runs report to a server."""
    if not server_in_use() or not (root := current_run.root_flow_run_id):
        return None
    watch = CancelWatch(root, ctx.campaign.name, ctx.cancelled, partial(steps.cancel_runs, ctx),
                        get_run_logger()).start()
    watch.own()  # a training campaign holds its hosts run by run, never the campaign
    return watch


def _campaign(ctx: steps.TrainingContext) -> TrainingOutcome | None:
    """The campaign's steps; None when it was cancelled (runs stopped, nothing packaged)."""
    logger = get_run_logger()
    me = _holder_of(ctx)
    hosts = [h.host for h in ctx.campaign.hosts]
    given_up: dict[str, str] = {}  # a host whose outage budget ran out: the others go on
    provisioned = {h: provision_task.submit(quote(ctx), h) for h in hosts}
    images = reachable(provisioned, given_up)
    steps.bind_images(ctx, images)
    described = {h: describe_task.submit(quote(ctx), h, quote(images[h])) for h in images}
    systems = reachable(described, given_up)
    hosts = [h for h in hosts if h not in given_up]
    total = sum(len(s.runs) for s in ctx.sets)
    for s in ctx.sets:
        logger.info("%s/%s: %d runs (ruleset %s asks %d of %s)", s.host, s.benchmark,
                    len(s.runs), ctx.manifests[s.benchmark].ruleset, s.required, s.official)
    progress = CampaignProgress(total, f"Training runs of campaign {ctx.campaign.name}")
    futures: list[PrefectFuture[Any]] = []
    at_once = {h: ctx.inventory.host(h).training_runs_at_once for h in hosts}
    with ExitStack() as whole_hosts:
        for host in (h for h in hosts if at_once[h] > 1):  # its set holds the whole host
            whole_hosts.enter_context(held(
                slot_names(host, None), replace(me, run=f"{host}'s training set"),
                partial(_log_wait, logger, host), ctx.cancelled, host_leases(ctx, host)))
        for host in hosts:
            runs = ctx.runs_of(host)
            for lane in range(at_once[host]):  # each lane one run at a time, lanes side by side
                previous: PrefectFuture[Any] | None = None
                for planned in runs[lane::at_once[host]]:
                    previous = train_task.submit(
                        quote(ctx), planned, quote(images[host]), quote(progress), quote(me),
                        hold_host=at_once[host] == 1,
                        wait_for=[allow_failure(previous)] if previous else [])
                    futures.append(previous)
        wait(futures)
    if ctx.cancelled.is_set():
        return None
    feedbacks = [f.state.result(raise_on_failure=False) for f in futures]
    ended = [f for f in feedbacks if isinstance(f, steps.Feedback)]
    create_table_artifact([{"run": f.label, "verdict": f.line, "set": f.standing,
                            "rcp": f"{f.rcp.state}: {f.rcp.message}"} for f in ended],
                          key="training-runs", description="Every training run and its verdict")
    outcome = steps.package(ctx, systems)
    report = steps.report(ctx, outcome, ended)
    create_markdown_artifact(report.read_text(), key="training-report",
                             description=f"Report of training campaign {ctx.campaign.name}")
    for (system, bench), score in sorted(outcome.ours.items()):
        logger.info("%s/%s: olympic score %.6f min (result_summarizer %s)", system, bench, score,
                    outcome.official.get((system, bench)))
    return TrainingOutcome(
        campaign=ctx.campaign.name, runs=total, passed=sum(f.passed for f in ended),
        failed=tuple(f"{f.label}: {f.line}" for f in ended if not f.passed),
        not_run=total - len(ended), given_up=given_up,
        scores={f"{s}/{b}": v for (s, b), v in outcome.ours.items()},
        official_scores={f"{s}/{b}": v for (s, b), v in outcome.official.items()},
        package=str(outcome.org), package_passed=outcome.verdict.passed,
        package_errors=tuple(outcome.verdict.errors + outcome.missing), report=str(report))


def _log_wait(logger: Any, host: str, why: str) -> None:
    logger.info("%s: %s", host, why)


def _track(ctx: steps.TrainingContext, summary: TrainingOutcome) -> None:
    """Nightly: append each system's olympic time to train, plot trends, alert on regressions."""
    logger = get_run_logger()
    db = ctx.campaign.paths.history
    scores = {(key.split("/", 1)[0], key.split("/", 1)[1]): v
              for key, v in summary.scores.items()}
    record_training(db, ctx.campaign.name, ctx.campaign.mode.value, scores)
    plot_trends(db, ctx.campaign.paths.trends)
    for regression in events.emit_regressions(ctx.campaign.name, db):
        logger.warning("REGRESSION %s", regression.describe())


def _holder_of(ctx: steps.TrainingContext) -> Holder:
    """This flow run as the holder of its hosts' slots."""
    found = FlowRunContext.get()
    run = found.flow_run if found else None
    left = sum(r.estimate_s for s in ctx.sets for r in s.runs)
    return Holder(str(run.id) if run else "", run.name if run else "", ctx.campaign.name,
                  run="", remaining_s=left, run_s=left)
