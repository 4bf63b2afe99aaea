"""The `submission` flow: pre-flight, provision, describe, runs, assemble, check, report.

Hosts work in parallel; each host runs one run at a time, in plan order. Only transient faults (a
dropped link, an unreachable host, a timeout) are retried, and a retry of a run reattaches to its
container rather than starting it again. A link that stays down is retried for as long as its
host's outage budget allows (minutes, not a count of retries); a host given up is said so, its
remaining runs are not run, and the other hosts finish. A finished run is never repeated: the run
store knows it by key, so a killed campaign started again continues where it stopped.

States tell the truth, because automations and dashboards key on them: a run whose verdict is
not passed is a Failed task run (its outcome stays in the store and the report), and the flow
run is Completed only when every run passed. A cancelled flow run stops its runs on the targets.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from prefect import Flow, Task, flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import FlowRun, TaskRun
from prefect.context import FlowRunContext
from prefect.futures import PrefectFuture, wait
from prefect.logging.loggers import flow_run_logger
from prefect.states import Cancelled, Completed, Failed, State
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import allow_failure, quote

from bench.campaign import Campaign
from bench.plan import PlannedRun
from bench.run import RunState
from bench.tuning_estimate import planned_searches
from collectors.system_json import SystemDescription
from flows import events, holders, steps, tuning_steps
from flows.cancellation import CancelWatch, cancelled_end
from flows.context import CampaignContext, load_context, resolve_campaign
from flows.holders import Holder, server_in_use
from flows.outcome import CampaignOutcome, RunOutcome
from flows.plan_view import analyzer_notes, plan_markdown, wait_notes
from flows.progress import CampaignProgress
from flows.slots import campaign_slot, held, slot_names
from flows.states import campaign_state, refused_state, run_state
from flows.status import work_left_s
from lab.errors import (
    HostUnreachable,
    LinkDown,
    NotCompared,
    RunCancelled,
    SubrunError,
    is_transient,
)
from lab.provision import ProvisionResult
from submission.history import plot_trends, record
from submission.index import TreeIndex

RETRIES = 2  # for a transient fault other than a link that is down (e.g. a command timed out)
LINK_RETRIES = 200  # a cap only: a link that is down is bounded by its host's outage budget
T = TypeVar("T")
Images = dict[str, ProvisionResult]  # benchmark -> its image (or native environment) on a host


def transient_only(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry a task only when it failed on a transient fault, never on a wrong result: a link
    still down as long as the host's outage budget allows (HostUnreachable, once it is spent,
    is final), any other transient fault twice."""
    # a verdict is data (a Failed state holding a RunOutcome), never an exception: no retry
    fault = state.result(raise_on_failure=False)
    if isinstance(fault, LinkDown):
        return True
    return is_transient(fault) and task_run.run_count <= RETRIES


RETRY = {"retries": LINK_RETRIES, "retry_delay_seconds": [5, 20],
         "retry_condition_fn": transient_only, "cache_policy": NO_CACHE}


@task(name="pre-flight", cache_policy=NO_CACHE)
def preflight_task(ctx: CampaignContext) -> str:
    return steps.check_ready(ctx)


@task(name="provision", **RETRY)  # type: ignore[call-overload]
def provision_task(ctx: CampaignContext, host: str) -> Images:
    return steps.provision_host(ctx, host)


@task(name="describe", **RETRY)  # type: ignore[call-overload]
def describe_task(ctx: CampaignContext, host: str, images: Images) -> SystemDescription:
    return steps.describe(ctx, host, images)


@task(name="run", task_run_name="{planned.label}", **RETRY)  # type: ignore[call-overload]
def run_task(ctx: CampaignContext, planned: PlannedRun, images: Images,
             progress: CampaignProgress, holder: Holder) -> State[RunOutcome]:
    logger = get_run_logger()

    def waiting(why: str) -> None:
        logger.info("%s: %s", planned.label, why)
        progress.waiting(planned.label, why)

    analyzer = steps.run_analyzer(ctx, planned)
    names = slot_names(planned.spec.host, analyzer)
    me = replace(holder, run=planned.label, run_s=planned.estimate_s,
                 remaining_s=work_left_s(ctx.plan, planned, ctx.store))
    try:
        if ctx.cancelled.is_set():  # start nothing once the campaign is cancelled
            raise RunCancelled(f"{planned.label}: not started, the campaign was cancelled.")
        leases = steps.host_leases(ctx, planned.spec.host, power=analyzer is not None)
        with held(names, me, waiting, ctx.cancelled, leases):  # any campaign, controller
            busy = steps.analyzer_busy(ctx, planned)
            if busy:
                waiting(busy)
            result = RunOutcome.of(steps.run(ctx, planned, images))
    except RunCancelled as e:
        logger.info("%s: cancelled", planned.label)
        progress.finished(planned.label, "cancelled")
        return Cancelled(message=str(e))
    except (HostUnreachable, NotCompared) as e:  # final: said once per run, the others go on
        logger.warning("%s: not run: %s", planned.label, e)
        progress.finished(planned.label, "not run")
        raise
    status = "passed" if result.passed else f"FAILED ({result.state}): {result.reason}"
    (logger.info if result.passed else logger.warning)("%s: %s", planned.label, status)
    warn = f" (warning: host {' and '.join(result.flags)})" if result.flags else ""
    progress.finished(planned.label + warn, "passed" if result.passed else "failed")
    events.emit(events.run_event(ctx.campaign.name, planned.spec, result))
    return run_state(result)


@task(name="assemble", cache_policy=NO_CACHE)
def assemble_task(ctx: CampaignContext, descriptions: dict[str, SystemDescription]
                  ) -> TreeIndex:
    return steps.assemble_tree(ctx, descriptions)


def stop_runs_in_flight(flow: Flow[..., Any], flow_run: FlowRun, state: State[Any]) -> None:
    """When the flow run is cancelled and its process is gone: stop its runs on the targets,
    keep their logs, and record them cancelled (the next start of the campaign runs them
    again). The flow's own process does this first (flows.cancellation); this catches what a
    killed process left. A flow run that was still waiting for its campaign's slot leaves the
    runs alone: they belong to the flow run holding it."""
    params = flow_run.parameters or {}
    given = params.get("campaign")
    campaign = Campaign.model_validate(given) if isinstance(given, dict) else given
    resolved = resolve_campaign(params.get("campaign_file"), campaign)
    if resolved.kind == "training":  # its subflow's own hook stops its runs
        from flows import training

        training.stop_runs_in_flight(flow, flow_run, state)
        return
    ctx = load_context(resolved)
    logger = flow_run_logger(flow_run)
    try:
        owner = holders.current(campaign_slot(ctx.campaign.name)) if server_in_use() else None
        if owner is not None and owner.flow_run_id != str(flow_run.id):
            logger.info("campaign %s is run by flow run '%s': its runs are left alone",
                        ctx.campaign.name, owner.flow_run_name)
            return
        for record in steps.cancel_runs(ctx):
            logger.info("cancelled %s (attempt %s)", record.spec.label, record.attempt)
    finally:
        ctx.close()


@flow(name="submission", log_prints=True, on_cancellation=[stop_runs_in_flight],
      task_runner=ThreadPoolTaskRunner(max_workers=16))  # type: ignore[arg-type]
def submission(campaign_file: str | None = None, campaign: Campaign | None = None,
               track_history: bool = False) -> State[CampaignOutcome]:
    """Run a whole campaign and assemble its submission tree (the demo campaign by default).

    The flow run ends Completed only when every run passed, else Failed; either way its
    result is the campaign's outcome (flows.outcome.CampaignOutcome; a training campaign's
    summary for `kind: training`). A cancelled one ends Cancelled, its runs in flight stopped
    and recorded cancelled."""
    resolved = resolve_campaign(campaign_file, campaign)
    if resolved.kind == "training":  # `kind: training`: the training flow, as a subflow
        from flows.training import training

        ran = training(campaign=resolved, track_history=track_history, return_state=True)
        if ran.is_cancelled():
            return Cancelled(message=ran.message)
        found = ran.result(raise_on_failure=False)
        if isinstance(found, BaseException):
            raise found
        # a fresh state holding the subflow's summary: the subflow's own holds a reference
        return (Completed if ran.is_completed() else Failed)(data=found, message=ran.message)
    ctx = load_context(resolved)
    logger = get_run_logger()
    me = _holder(ctx)
    watch = CancelWatch(me.flow_run_id, ctx.campaign.name, ctx.cancelled,
                        partial(steps.cancel_runs, ctx), logger).start() \
        if server_in_use() and me.flow_run_id else None
    try:
        # two flow runs of one campaign share its run store: they take turns
        with held([campaign_slot(ctx.campaign.name)], me, logger.info, ctx.cancelled), \
                (watch.on_interrupt() if watch else nullcontext()):
            if watch is not None:
                watch.own()
            outcome = _campaign(ctx, track_history, me)
        if outcome is None:
            return _cancelled(ctx, watch)
        state = campaign_state(outcome)
        events.emit(events.campaign_event(outcome, state.is_completed()))
        return state
    except RunCancelled:  # cancelled while waiting for the campaign's slot
        return _cancelled(ctx, watch)
    except SubrunError as e:  # a refusal the user must act on: its paragraph, no traceback
        return refused_state(e)
    finally:
        if watch is not None:
            watch.stop()
        ctx.close()


def _holder(ctx: CampaignContext) -> Holder:
    """This flow run as the holder of the slots it takes."""
    found = FlowRunContext.get()
    run = found.flow_run if found else None
    return Holder(str(run.id) if run else "", run.name if run else "", ctx.campaign.name,
                  run="", remaining_s=ctx.plan.estimate_s, run_s=ctx.plan.estimate_s)


def _cancelled(ctx: CampaignContext, watch: CancelWatch | None) -> State[CampaignOutcome]:
    return cancelled_end(watch, f"campaign {ctx.campaign.name}", ctx.store,
                         "runs them, and repeats nothing that finished")


def _campaign(ctx: CampaignContext, track_history: bool, me: Holder
              ) -> CampaignOutcome | None:
    """The campaign's steps; None when it was cancelled (its runs stopped, nothing assembled)."""
    logger = get_run_logger()
    try:
        others = holders.other_campaigns_on(ctx.campaign.name, ctx.plan.hosts())
    except Exception as e:  # the plan artifact without the waits, rather than no campaign
        logger.warning("other campaigns' use of the hosts is not counted in the plan: %s", e)
        others = {}
    waits = {h: holder.left_s() for h, holder in others.items()}
    notes = analyzer_notes(ctx.plan, ctx.inventory) + wait_notes(others) + \
        [f"tuning: {n}" for n in tuning_steps.plan_notes(ctx)]
    searches = planned_searches(ctx.campaign, ctx.manifests, ctx.book, ctx.evidence.settle_s)
    create_markdown_artifact(plan_markdown(ctx.plan, notes, waits, searches),
                             key="campaign-plan",
                             description=f"Plan of campaign {ctx.campaign.name}")
    loadgen = preflight_task(quote(ctx))  # type: ignore[call-overload]
    hosts = ctx.plan.hosts()
    given_up: dict[str, str] = {}  # host -> why it was given up before its runs
    provisioned = {h: provision_task.submit(quote(ctx), h) for h in hosts}
    images = reachable(provisioned, given_up)
    steps.bind_images(ctx, images, loadgen)
    if ctx.campaign.tune:  # before the runs: their settings (and keys) take what it finds
        from flows.tuning import run_tuning

        run_tuning(ctx, images, given_up, me)
    for note in tuning_steps.apply_tuning(ctx):
        logger.info("tuning: %s", note)
    described = {h: describe_task.submit(quote(ctx), h, quote(images[h])) for h in images
                 if h not in given_up}
    descriptions = reachable(described, given_up)
    hosts = [h for h in hosts if h not in given_up]
    for problem in steps.check_systems(ctx, list(descriptions.values())):
        logger.warning("system description: %s", problem)
    progress = CampaignProgress(len(ctx.plan.runs), f"Runs of campaign {ctx.campaign.name}")
    submitted = [p for h in hosts for p in ctx.plan.for_host(h)]
    futures = _run_all(ctx, submitted, images, progress, me)
    if ctx.cancelled.is_set():
        return None
    stragglers = steps.left_running(ctx, submitted)
    if stragglers:  # their tasks ended while they ran on: reattach, collect and judge them
        logger.warning("runs still running on their hosts after their tasks ended, reattached "
                       "now: %s", ", ".join(p.label for p in stragglers))
        again = dict(zip((p.label for p in stragglers),
                         _run_all(ctx, stragglers, images, progress, me), strict=True))
        futures = [again.get(p.label, f) for p, f in zip(submitted, futures, strict=True)]
        if ctx.cancelled.is_set():
            return None
    # a run that ended holds its outcome (Completed or Failed); its final word is the store's,
    # since settling a compliance set may have measured or re-verified it after its task
    ended = [p for p, f in zip(submitted, futures, strict=True)
             if isinstance(f.state.result(raise_on_failure=False), RunOutcome)]
    outcomes = [o for o in (steps.final_outcome(ctx, p) for p in ended) if o is not None]
    finished = {p.label for p in ended}
    not_run = {p.label: str(f.state.result(raise_on_failure=False))
               for p, f in zip(submitted, futures, strict=True) if p.label not in finished}
    not_run |= {p.label: why for h, why in given_up.items() for p in ctx.plan.for_host(h)}
    not_run = {label: why + steps.still_on_host(ctx, label) for label, why in not_run.items()}
    create_table_artifact([o.__dict__ for o in outcomes], key="campaign-runs",
                          description="Every run of the campaign and its verdict")
    index = assemble_task(quote(ctx), quote(descriptions))  # type: ignore[call-overload]
    checks = steps.check_tree(ctx, index)
    checker = steps.official_check(ctx)
    tarball = steps.package(ctx)
    compared = steps.estimates(ctx)
    report = steps.report(ctx, index, checks, checker, tarball, compared)
    create_markdown_artifact(report.markdown, key="campaign-report",
                             description=f"Report of campaign {ctx.campaign.name}")
    if track_history:
        _track(ctx)
    outcome = CampaignOutcome(
        campaign=ctx.campaign.name, runs=len(ctx.plan.runs),
        passed=sum(o.passed for o in outcomes),
        failed=tuple(f"{o.label}: {o.reason}" for o in outcomes if not o.passed),
        not_run=len(ctx.plan.runs) - len(outcomes), not_run_reasons=not_run,
        tree=str(ctx.campaign.paths.tree), report=report.html_path,
        precheck=checks.summary(), tarball=tarball.path if tarball else None,
        host_times=tuple(compared.hosts) if compared else ())
    logger.info("campaign %s: %s/%s runs passed; tree %s; report %s", ctx.campaign.name,
                outcome.passed, outcome.runs, outcome.tree, outcome.report)
    return outcome


def _run_all(ctx: CampaignContext, runs: list[PlannedRun], images: dict[str, Images],
             progress: CampaignProgress, me: Holder) -> list[PrefectFuture[RunOutcome]]:
    """Run the runs, one at a time per host, hosts side by side (a failed run does not stop
    its host's next ones); return their futures, in order, once all have ended."""
    futures: list[PrefectFuture[RunOutcome]] = []
    previous: dict[str, PrefectFuture[RunOutcome]] = {}
    for planned in runs:
        host = planned.spec.host
        before = previous.get(host)
        previous[host] = run_task.submit(quote(ctx), planned, quote(images[host]),
                                         quote(progress), quote(me),
                                         wait_for=[allow_failure(before)] if before else [])
        futures.append(previous[host])
    wait(futures)
    return futures


def reachable(futures: dict[str, PrefectFuture[T]], given_up: dict[str, str]
               ) -> dict[str, T]:
    """The results of per-host tasks; a host given up (its outage budget spent) is noted in
    given_up instead, so the campaign goes on with the others. Any other failure is raised."""
    results = {}
    for host, future in futures.items():
        try:
            results[host] = future.result()
        except HostUnreachable as e:
            get_run_logger().warning("host %s given up: %s", host, e)
            given_up[host] = str(e)
    return results


def _track(ctx: CampaignContext) -> None:
    """Nightly: append to the history, plot trends, and alert on regressions."""
    logger = get_run_logger()
    paths = ctx.campaign.paths
    records = [r for r in ctx.store.runs() if r.state == RunState.FINISHED]
    record(paths.history, ctx.campaign.name, records)
    plot_trends(paths.history, paths.trends)
    for regression in events.emit_regressions(ctx.campaign.name, paths.history):
        logger.warning("REGRESSION %s", regression.describe())
