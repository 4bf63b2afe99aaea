"""Tuning as Prefect tasks: one task per host (hosts in parallel), each probe holding its
host's slot like any run, every probe and every search's end on the progress.

`subrun tune CAMPAIGN` runs the `tuning` flow (provision, then tune, nothing else); a campaign
with `tune: auto|true` runs the same tasks inside the `submission` flow, before its runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import replace

from prefect import flow, get_run_logger, task
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from bench.campaign import Campaign
from bench.tune_search import probed, tuned_key
from bench.tuning_record import Probe, TuningRecord
from bench.tuning_use import Planned
from flows import steps, tuning_steps
from flows.context import CampaignContext, load_context, resolve_campaign
from flows.holders import Holder
from flows.progress import CampaignProgress
from flows.slots import campaign_slot, held, slot_names
from flows.submission import RETRY, _holder, preflight_task, provision_task, reachable
from flows.tuning_steps import TuneRow
from lab.errors import ConfigError, RunCancelled
from lab.provision import ProvisionResult


@task(name="tune", task_run_name="tune {host}", **RETRY)  # type: ignore[call-overload]
def tune_task(ctx: CampaignContext, host: str, images: Mapping[str, ProvisionResult],
              searches: list[Planned], progress: CampaignProgress,
              holder: Holder) -> list[TuneRow]:
    logger = get_run_logger()

    def around(label: str) -> AbstractContextManager[None]:
        def waiting(why: str) -> None:
            logger.info("%s: %s", label, why)
            progress.note(f"{label}: {why}", "waiting")

        return held(slot_names(host, None), replace(holder, run=f"tuning {label}"), waiting,
                    ctx.cancelled, steps.host_leases(ctx, host))

    def landed(record: TuningRecord, probe: Probe) -> None:
        line = f"{record.host}/{record.benchmark}/{record.scenario.value}: " \
               f"{describe_probe(record, probe)}"
        logger.info("probe %s", line)
        progress.note(line, "probe")

    try:
        rows = tuning_steps.tune_host(ctx, host, images, searches, around=around,
                                      on_probe=landed)
    except RunCancelled as e:
        logger.info("tuning on %s cancelled: %s", host, e)
        return []
    for row in rows:
        (logger.warning if row.state == "failed" else logger.info)(
            "%s: %s %s", row.label, row.state, summary(row))
        progress.finished(f"{row.label}: {summary(row)}", row.state)
    return rows


def run_tuning(ctx: CampaignContext, images: Mapping[str, Mapping[str, ProvisionResult]],
               given_up: dict[str, str], holder: Holder, *, counts: bool = False,
               again: bool = False) -> list[TuneRow]:
    """Tune every host in parallel (their images bound in ctx.plan); a host given up is noted
    in given_up. counts: the progress counts searches (`subrun tune`), else it only adds lines
    beside the campaign's count of runs."""
    searches = tuning_steps.planned(ctx, again=again)
    progress = CampaignProgress(len(searches), f"Tuning of campaign {ctx.campaign.name}",
                                key="tuning-progress", counts=counts)
    futures = {h: tune_task.submit(quote(ctx), h, quote(images[h]), quote(searches),
                                   quote(progress), quote(holder))
               for h in images if h not in given_up}
    return [row for rows in reachable(futures, given_up).values() for row in rows]


@flow(name="tuning", log_prints=True,
      task_runner=ThreadPoolTaskRunner(max_workers=16))  # type: ignore[arg-type]
def tuning(campaign_file: str | None = None, campaign: Campaign | None = None,
           again: bool = False) -> list[TuneRow]:
    """Tune a campaign's hosts (provisioning them first) and nothing else: the searches its
    `tune:` asks for, `auto` when it says false; again: start every search over."""
    resolved = resolve_campaign(campaign_file, campaign)
    if resolved.kind == "training":
        raise ConfigError(f"Campaign '{resolved.name}' is a training campaign: tuning finds "
                          "LoadGen targets of inference scenarios; it has none.")
    if not resolved.tune:
        resolved = resolved.model_copy(update={"tune": "auto"})
    ctx = load_context(resolved)
    me = _holder(ctx)
    try:
        with held([campaign_slot(ctx.campaign.name)], me, get_run_logger().info, ctx.cancelled):
            loadgen = preflight_task(quote(ctx))  # type: ignore[call-overload]
            given_up: dict[str, str] = {}
            provisioned = {h: provision_task.submit(quote(ctx), h) for h in ctx.plan.hosts()}
            images = reachable(provisioned, given_up)
            steps.bind_images(ctx, images, loadgen)
            rows = run_tuning(ctx, images, given_up, me, counts=True, again=again)
        return rows + [TuneRow(h, "", "", "failed", f"host given up: {why}")
                       for h, why in given_up.items()]
    finally:
        ctx.close()


def describe_probe(record: TuningRecord, probe: Probe) -> str:
    """One line per probe: what it tried and what LoadGen said."""
    value = probed(probe, record.scenario)
    name = tuned_key(record.scenario).rsplit(".", 1)[-1]
    figures = []
    if probe.samples_per_s:
        figures.append(f"{probe.samples_per_s:.0f} samples/s")
    if probe.latency_ns:
        figures.append(f"latency {probe.latency_ns / 1e6:.3g} ms")
    return (f"probe {len(record.probes)} {name} {value:g}: "
            f"{'VALID' if probe.valid else 'INVALID'} ({', '.join(figures)}, "
            f"{probe.duration_s:.0f} s)")


def summary(row: TuneRow) -> str:
    """What a search ended with, for the progress lines and the logs."""
    record = row.record
    if row.state != "tuned" or record is None:
        return row.detail
    chosen = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in record.chosen.items())
    return (f"{chosen} (found {record.found:.4g}, {len(record.probes)} probes, "
            f"{record.cost_s:.0f} s)")

