"""The tuning steps of a campaign, free of Prefect: `flows/tuning.py` wraps them in tasks.

Tuning runs after provisioning (a record is keyed by the image a host really has) and before
the host's runs; afterwards the plan is made again with the records the runs use, so their
settings, and so their keys, carry the tuned values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from bench.plan_record import write_plan
from bench.run import RunKind
from bench.target import RunTarget
from bench.tuning import Around, OnProbe, tune
from bench.tuning_record import TuningRecord
from bench.tuning_use import Digests, Planned, plan_tuning, records_for, with_start
from flows.context import CampaignContext, evidence_for, plan_for
from lab.errors import RunError
from lab.provision import ProvisionResult

log = logging.getLogger("subrun.tuning")


@dataclass(frozen=True)
class TuneRow:
    """What the tuning did for one host x benchmark x scenario."""

    host: str
    benchmark: str
    scenario: str
    state: str  # tuned, kept (a current record), skipped (the campaign sets it), failed
    detail: str
    record: TuningRecord | None = None

    @property
    def label(self) -> str:
        return f"{self.host}/{self.benchmark}/{self.scenario}"


def bound(ctx: CampaignContext) -> tuple[Digests, str]:
    """The image digest of each host x benchmark and the LoadGen build, once bound."""
    runs = [r for r in ctx.plan.runs if r.spec.kind is not RunKind.TRAINING]
    digests = {(r.spec.host, r.spec.benchmark): r.spec.image_digest for r in runs}
    return digests, next((r.spec.loadgen_version for r in runs), "")


def planned(ctx: CampaignContext, *, again: bool = False) -> list[Planned]:
    """The searches the campaign asks for, on the images it has bound."""
    digests, loadgen = bound(ctx)
    return plan_tuning(ctx.campaign, ctx.manifests, ctx.book, digests, loadgen, again=again)


def tune_host(ctx: CampaignContext, host: str, images: Mapping[str, ProvisionResult],
              searches: list[Planned], *, around: Around | None = None,
              on_probe: OnProbe | None = None) -> list[TuneRow]:
    """Run the host's searches one after the other. A search whose probe failed is reported
    and the others go on; a link that is down or a cancel propagates (a retry, or the next
    start of the campaign, continues from the recorded probes)."""
    rows = []
    for item in (p for p in searches if p.triple[0] == host):
        _, benchmark, scenario = item.triple
        if item.job is None:
            state = "kept" if item.why.startswith("kept") else "skipped"
            found = ctx.book.history(*item.triple)
            rows.append(TuneRow(host, benchmark, scenario.value, state, item.why,
                                found[-1] if found else None))
            continue
        image = images[benchmark]
        target = RunTarget(ctx.host(host), ctx.inventory.host(host), ctx.manifests[benchmark],
                           image.image, image.image_id, ctx.campaign.name,
                           cancelled=ctx.cancelled)
        try:
            record = tune(target, with_start(item.job, ctx.book), ctx.book, ctx.store,
                          ctx.rules, around=around, on_probe=on_probe)
        except RunError as e:
            log.warning("tuning %s failed: %s", "/".join(map(str, item.triple)), e)
            rows.append(TuneRow(host, benchmark, scenario.value, "failed", str(e),
                                ctx.book.find(item.job.key)))
            continue
        rows.append(TuneRow(host, benchmark, scenario.value, "tuned" if record.chosen
                            else "failed", "" if record.chosen else "no value found", record))
    return rows


def apply_tuning(ctx: CampaignContext) -> list[str]:
    """Plan the campaign again with the records its runs use on the bound images (each run's
    settings, and so its key, change with them), estimate it from what is known now (tuning
    may just have learned more) and keep it as plan.json; a note per record used or stale,
    for the caller to log."""
    digests, loadgen = bound(ctx)
    ctx.evidence = evidence_for(ctx.campaign, ctx.inventory)  # with what tuning just learned
    plan, notes = plan_for(ctx.campaign, ctx.manifests, ctx.rules, ctx.evidence, digests,
                           loadgen)
    ctx.plan = plan.with_images(digests, loadgen).reestimated(ctx.manifests, ctx.rules,
                                                             ctx.evidence)
    write_plan(ctx.plan, ctx.campaign.paths.plan)  # the plan the runs follow, for the report
    return notes


def plan_notes(ctx: CampaignContext) -> list[str]:
    """Before provisioning: the records the plan took (the newest of the round) or left out."""
    return records_for(ctx.campaign, ctx.manifests, ctx.book)[1]
