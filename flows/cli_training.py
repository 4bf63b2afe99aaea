"""`subrun run` for a campaign file with `kind: training`: the training flow, a line per run."""

from __future__ import annotations

from pathlib import Path

import typer

from bench.campaign import Campaign
from bench.submitted import passed
from flows.cli_common import guarded, keep_off_local_runs, out, progress_bar, shown
from flows.private_api import flow_run_settings, wait_ready


def is_training(campaign: Path | None) -> bool:
    """Whether the campaign file (the demo campaign when None) is a training campaign."""
    from flows.context import resolve_campaign

    return campaign is not None and guarded(lambda: resolve_campaign(campaign, None)).kind \
        == "training"


def run_training(campaign_file: Path, history: bool = False) -> None:
    """Run a training campaign end to end; exit 1 unless every run and the package passed."""
    from flows.context import resolve_campaign
    from flows.states import training_outcome_of
    from flows.training import training
    from flows.training_steps import load_training_context

    campaign: Campaign = guarded(lambda: resolve_campaign(campaign_file, None))
    ctx = guarded(lambda: load_training_context(campaign))  # validate before Prefect starts
    keep_off_local_runs(ctx.inventory, campaign.inventory)
    total = sum(len(s.runs) for s in ctx.sets)
    for s in ctx.sets:
        out.print(f"{s.host}/{s.benchmark}: {len(s.runs)} runs as {s.official} "
                  f"(the ruleset asks {s.required})", highlight=False)
    guarded(wait_ready)  # the command's own Prefect API (flows.private_api), if it has one
    with progress_bar(f"training campaign {campaign.name}", total), flow_run_settings():
        summary = guarded(lambda: training_outcome_of(training(
            campaign_file=str(campaign_file), track_history=history, return_state=True)))
    out.print(f"\n{summary.passed} of {summary.runs} runs passed.")
    for failure in summary.failed:
        out.print(f"[red]failed:[/] {shown(failure)}", highlight=False)
    for host, why in summary.given_up.items():
        out.print(f"[red]not run:[/] {shown(host)}: {shown(why)}", highlight=False)
    for key, score in summary.scores.items():
        theirs = summary.official_scores.get(key)
        out.print(f"{key}: olympic score {score:.6f} min; result_summarizer "
                  + (f"{theirs:.6f} min" if theirs is not None else "gave none"),
                  highlight=False)
    verdict = "passed" if summary.package_passed else "FAILED"
    out.print(f"Package: {summary.package}\npackage_checker: {verdict}")
    for problem in summary.package_errors:
        out.print(f"[red]package:[/] {shown(problem)}", highlight=False)
    out.print(f"Report: {summary.report}")
    if summary.failed or summary.not_run or not summary.package_passed:
        raise typer.Exit(1)


def plan_training(campaign_file: Path) -> None:
    """`subrun plan` of a training campaign: each system's set, its run count and its seeds."""
    from rich.table import Table

    from flows.context import resolve_campaign
    from flows.training_steps import load_training_context

    campaign = guarded(lambda: resolve_campaign(campaign_file, None))
    ctx = guarded(lambda: load_training_context(campaign))  # draws and keeps the seeds
    for s in ctx.sets:
        manifest = ctx.manifests[s.benchmark]
        table = Table(title=f"{s.host}/{s.benchmark}: {len(s.runs)} runs as {s.official} "
                            f"(ruleset {manifest.ruleset} asks {s.required})")
        for column in ("run", "seed"):
            table.add_column(column)
        for planned in s.runs:
            table.add_row(planned.label, str(planned.spec.settings["seed"]))
        out.print(table)
    selection = ("; more runs than the ruleset asks: the median window of "
                 "consecutive runs is submitted") if any(
        len(s.runs) > s.required for s in ctx.sets) else ""
    out.print(f"Training campaign '{campaign.name}': {sum(len(s.runs) for s in ctx.sets)} runs "
              f"on {len(campaign.hosts)} system(s), {campaign.division} division, "
              f"{campaign.mode.value} mode"
              f"{' (not submittable)' if campaign.mode.value == 'short' else ''}; each system "
              f"runs one at a time, systems in parallel{selection}.", highlight=False)


def status_training(campaign_file: Path) -> None:
    """`subrun status` of a training campaign: each run's state and each set's score so far."""
    from rich.table import Table

    from bench.training_campaign import plan_sets, standing
    from flows.context import resolve_campaign
    from flows.training_steps import load_training_context

    campaign = guarded(lambda: resolve_campaign(campaign_file, None))
    ctx = guarded(lambda: load_training_context(campaign))
    records = sorted((r for r in ctx.store.runs() if r.spec.kind.value == "training"),
                     key=lambda r: r.started_at)
    by_seed = {(r.spec.host, r.spec.benchmark, r.spec.settings.get("seed")): r for r in records}
    # run keys carry the image: the latest one each set ran with
    ctx.sets = plan_sets(campaign, ctx.manifests, ctx.submitter,
                         {(r.spec.host, r.spec.benchmark): r.spec.image_digest for r in records},
                         ctx.store)
    table = Table(title=f"training campaign {campaign.name} ({campaign.paths.store})")
    for column in ("run", "seed", "state", "detail"):
        table.add_column(column)
    for s in ctx.sets:
        for planned in s.runs:
            seed = planned.spec.settings["seed"]
            record = by_seed.get((s.host, s.benchmark, seed))
            state, detail = "pending", ""
            if record is not None:
                state = "done" if passed(record) else record.state
                detail = record.error or (record.verdict.reason if record.verdict else "")
            table.add_row(planned.label, str(seed), state, shown(detail))
    out.print(table)
    for s in ctx.sets:
        out.print(f"{s.host}/{s.benchmark}: {standing(s, ctx.store).describe()}",
                  highlight=False)
