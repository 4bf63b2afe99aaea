"""Campaign commands: `plan`, `run`, `status`, `serve`, `server`, `deploy`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from flows.cli_common import err, guarded, keep_off_local_runs, out, progress_bar, shown
from flows.context import CampaignContext
from flows.environment import configure_prefect
from flows.private_api import flow_run_settings, private_api, wait_ready

if TYPE_CHECKING:
    from flows.holders import Holder

CampaignArg = Annotated[
    Path | None,
    typer.Argument(help="Campaign YAML file (default: campaigns/demo.yaml, the embedded demo)."),
]
STATE_STYLE = {"done": "green", "failed": "red", "running": "yellow", "cancelled": "magenta",
               "pending": "dim"}


def register(app: typer.Typer) -> None:
    """Add the campaign commands to the subrun command line."""
    app.command("plan")(plan_command)
    app.command("run")(run_command)
    app.command("status")(status_command)
    from flows import cli_serve

    cli_serve.register(app)


def _load(campaign: Path | None) -> CampaignContext:
    from flows.context import load_context, resolve_campaign

    return guarded(lambda: load_context(resolve_campaign(campaign, None)))


def plan_command(campaign: CampaignArg = None) -> None:
    """Show every run the campaign will make, per host, with an estimated duration."""
    from bench.tuning_estimate import planned_searches, tuning_seconds
    from flows.cli_training import is_training, plan_training
    from flows.plan_view import (
        analyzer_notes,
        basis_summary,
        duration,
        probes,
        tuning_summary,
        wait_notes,
        wall_time_s,
    )

    if campaign is not None and is_training(campaign):  # `kind: training` in the file
        plan_training(campaign)
        return

    ctx = _load(campaign)
    plan = ctx.plan
    searches = guarded(lambda: planned_searches(ctx.campaign, ctx.manifests, ctx.book,
                                                ctx.evidence.settle_s))
    tuning = tuning_seconds(searches)
    for host in plan.hosts():
        table = Table(title=f"{host}: {len(plan.for_host(host))} runs, about "
                            f"{duration(plan.host_estimate_s(host) + tuning.get(host, 0.0))}")
        for column in ("benchmark", "scenario", "run", "estimate", "basis"):
            table.add_column(column)
        for search in (s for s in searches if s.host == host):
            table.add_row(search.benchmark, search.scenario.value, "tuning",
                          duration(search.seconds), probes(search))
        for run in plan.for_host(host):
            basis = run.basis.value
            table.add_row(run.spec.benchmark, run.spec.scenario.value, run.spec.kind.value,
                          duration(run.estimate_s),
                          f"[yellow]{basis}[/]" if basis == "default" else basis)
        out.print(table)
    c = ctx.campaign
    held = _held_by_others(ctx)
    waits = {h: holder.left_s() for h, holder in held.items()}
    out.print(f"Campaign '{c.name}': {len(plan.runs)} runs on {len(plan.hosts())} host(s), "
              f"round {c.round}, {c.division} division, {c.mode.value} mode"
              f"{' (not submittable)' if c.mode.value == 'short' else ''}; estimated wall time "
              f"{duration(wall_time_s(plan, waits, tuning))} (hosts in parallel).")
    out.print(basis_summary(plan), highlight=False)
    if searches:
        out.print(tuning_summary(searches), highlight=False)
    for note in sorted({r.assumption for r in plan.runs if r.assumption}):
        out.print(f"[yellow]note:[/] {shown(note)}", highlight=False)
    for note in wait_notes(held):
        out.print(f"[yellow]wait:[/] {shown(note)}", highlight=False)
    for note in analyzer_notes(plan, ctx.inventory):
        out.print(f"[yellow]power:[/] {shown(note)}", highlight=False)
    from flows.tuning_steps import plan_notes

    for note in guarded(lambda: plan_notes(ctx)):
        out.print(f"[yellow]tuning:[/] {shown(note)}", highlight=False)
    _check_power(ctx)


def _held_by_others(ctx: CampaignContext) -> dict[str, Holder]:
    """Hosts of the campaign another campaign's flow run holds now (with a server in use);
    a server that does not answer costs the estimate its waits, not the command."""
    configure_prefect()
    from flows.holders import other_campaigns_on

    try:
        return other_campaigns_on(ctx.campaign.name, ctx.plan.hosts())
    except Exception as e:  # whatever the server did, the plan still shows
        err.print(f"[yellow]note:[/] other campaigns' use of the hosts is not counted: the "
                  f"Prefect server did not answer ({e}).", highlight=False)
        return {}


def _check_power(ctx: CampaignContext) -> None:
    """Official power is refused here, before Prefect starts, with the key to set."""
    from flows.steps import check_power

    try:
        note = guarded(lambda: check_power(ctx))
    finally:
        ctx.close()
    if note:
        out.print(f"[green]power:[/] {shown(note)}", highlight=False)


def run_command(campaign: CampaignArg = None,
                history: Annotated[bool, typer.Option(help="Record results in the nightly "
                                                      "history and plot trends.")] = False
                ) -> None:
    """Run a campaign end to end from this machine, no server needed; exit 1 if a run failed."""
    configure_prefect()
    with private_api():  # boots while the campaign is read and checked
        _run(campaign, history)


def _run(campaign: Path | None, history: bool) -> None:
    from flows.cli_training import is_training, run_training

    if campaign is not None and is_training(campaign):  # `kind: training` in the file
        run_training(campaign, history=history)
        return
    ctx = _load(campaign)  # validate before Prefect starts
    _check_power(ctx)
    keep_off_local_runs(ctx.inventory, ctx.campaign.inventory)  # before Prefect starts, too
    from flows.states import outcome_of
    from flows.submission import submission

    guarded(wait_ready)
    with progress_bar(f"campaign {ctx.campaign.name}", len(ctx.plan.runs)), flow_run_settings():
        # the flow run is Failed when a run failed; the outcome is its result either way
        outcome = guarded(lambda: outcome_of(submission(
            campaign_file=str(campaign) if campaign else None, track_history=history,
            return_state=True)))
    out.print(f"\n{outcome.passed} of {outcome.runs} runs passed.")
    for failure in outcome.failed:
        out.print(f"[red]failed:[/] {shown(failure)}", highlight=False)
    by_reason: dict[str, list[str]] = {}
    for label, reason in outcome.not_run_reasons.items():
        by_reason.setdefault(reason, []).append(label)
    for reason, labels in by_reason.items():
        out.print(f"[red]not run:[/] {shown(', '.join(labels))}: {shown(reason)}",
                  highlight=False)
    if outcome.tarball:
        out.print(f"Submission tree: {outcome.tree}\nTarball: {outcome.tarball}")
    else:
        out.print("No result passed every run it needs, so no submission tree was assembled.")
    out.print(f"Report: {outcome.report}\nPrechecks: {outcome.precheck}")
    for host in outcome.host_times:
        out.print(f"Estimate vs actual: {shown(host.line())}", highlight=False)
    if outcome.failed or outcome.not_run:
        raise typer.Exit(1)


HostsOpt = Annotated[bool, typer.Option(
    "--hosts/--no-hosts", help="Also ask each host what the campaign left there (containers, "
    "processes, run folders) and who holds it now.")]


def status_command(campaign: CampaignArg = None, hosts: HostsOpt = True) -> None:
    """Show each run of a campaign as done, running, failed or pending, the time left, and
    what the campaign left on its hosts."""
    from flows.cli_training import is_training, status_training

    if campaign is not None and is_training(campaign):  # `kind: training` in the file
        status_training(campaign)
        return
    from flows.plan_view import duration, wait_notes
    from flows.status import campaign_status, eta_s

    ctx = _load(campaign)
    statuses = guarded(lambda: campaign_status(ctx.plan, ctx.store))  # a corrupt run.json
    table = Table(title=f"campaign {ctx.campaign.name} ({ctx.campaign.paths.store})")
    for column in ("host", "benchmark", "scenario", "run", "state", "detail"):
        table.add_column(column)
    for s in statuses:
        spec = s.planned.spec
        style = STATE_STYLE[s.word]
        table.add_row(spec.host, spec.benchmark, spec.scenario.value, spec.kind.value,
                      f"[{style}]{s.word}[/]", shown(s.detail))
    out.print(table)
    counts = {word: sum(s.word == word for s in statuses) for word in STATE_STYLE}
    busy = {s.planned.spec.host for s in statuses if not s.passed}
    held = {h: x for h, x in _held_by_others(ctx).items() if h in busy}
    waits = {h: holder.left_s() for h, holder in held.items()}
    out.print(", ".join(f"{n} {word}" for word, n in counts.items()
                        if n or word != "cancelled")  # cancelled only after a cancellation
              + f"; about {duration(eta_s(ctx.plan, statuses, waits))} left.")
    for note in wait_notes(held):
        out.print(f"[yellow]wait:[/] {shown(note)}", highlight=False)
    if hosts:
        _print_leftovers(ctx)


def _print_leftovers(ctx: CampaignContext) -> None:
    """One line per host: what the campaign left there and who holds the host, or why the
    host was not reached."""
    from bench.leftovers import leftovers
    from lab.errors import SubrunError

    for name in ctx.plan.hosts():
        try:
            found = leftovers(ctx.host(name), ctx.campaign.name)
        except SubrunError as e:
            out.print(f"[yellow]host[/] {shown(f'{name}: not reached: {e}')}", highlight=False)
            continue
        style = "green" if found.empty else "yellow"
        out.print(f"[{style}]host[/] {shown(found.line())}", highlight=False)
    ctx.close()
