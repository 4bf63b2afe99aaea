"""`subrun run` for a campaign file with `kind: training`: the training flow, a line per run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.campaign import Campaign
from flows.cli_common import err, guarded, out, shown


def is_training(campaign: Path | None) -> bool:
    """Whether the campaign file (the demo campaign when None) is a training campaign."""
    from flows.context import resolve_campaign

    return campaign is not None and guarded(lambda: resolve_campaign(campaign, None)).kind \
        == "training"


def run_training(campaign_file: Path) -> None:
    """Run a training campaign end to end; exit 1 unless every run and the package passed."""
    from flows import progress
    from flows.context import resolve_campaign
    from flows.states import summary_of
    from flows.training import training
    from flows.training_steps import load_training_context

    campaign: Campaign = guarded(lambda: resolve_campaign(campaign_file, None))
    ctx = guarded(lambda: load_training_context(campaign))  # validate before Prefect starts
    total = sum(len(s.runs) for s in ctx.sets)
    for s in ctx.sets:
        out.print(f"{s.host}/{s.benchmark}: {len(s.runs)} runs as {s.official} "
                  f"(the ruleset asks {s.required})", highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        job = bar.add_task(f"training campaign {campaign.name}", total=total)

        def advance(step: progress.Step) -> None:
            colour = {"passed": "green", "waiting": "yellow"}.get(step.outcome, "red")
            bar.console.print(f"[{colour}]{step.outcome:>6}[/] {shown(step.label)}",
                              highlight=False)
            bar.update(job, completed=step.done)

        progress.listen(advance)
        try:
            summary = guarded(lambda: summary_of(training(campaign_file=str(campaign_file),
                                                          return_state=True)))
        finally:
            progress.unlisten(advance)
    out.print(f"\n{summary['passed']} of {summary['runs']} runs passed.")
    for failure in summary["failed"]:
        out.print(f"[red]failed:[/] {shown(failure)}", highlight=False)
    for key, score in summary["scores"].items():
        theirs = summary["official_scores"].get(key)
        out.print(f"{key}: olympic score {score:.6f} min; result_summarizer "
                  + (f"{theirs:.6f} min" if theirs is not None else "gave none"),
                  highlight=False)
    verdict = "passed" if summary["package_passed"] else "FAILED"
    out.print(f"Package: {summary['package']}\npackage_checker: {verdict}")
    for problem in summary["package_errors"]:
        out.print(f"[red]package:[/] {shown(problem)}", highlight=False)
    out.print(f"Report: {summary['report']}")
    if summary["failed"] or summary["not_run"] or not summary["package_passed"]:
        raise typer.Exit(1)
