"""The `subrun` command line. Errors from below arrive as SubrunError and leave as one paragraph."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flows import cli_alert, cli_campaign, cli_describe, cli_power, cli_tune
from flows.cli_common import err, guarded, out, shown

HELP = ("Run MLPerf Inference submission campaigns on your lab machines, end to end.\n\n"
        "Plan a campaign, run it (performance, accuracy, compliance and power runs, each judged "
        "as it ends), follow its status, and get a submission tree ready for the MLCommons "
        "checker. Start with `subrun run` (the demo campaign on this machine) or `subrun plan "
        "CAMPAIGN.yaml`.")

app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP)
hosts_app = typer.Typer(no_args_is_help=True, help="Inspect the lab inventory (hosts.yaml).")
app.add_typer(hosts_app, name="hosts")
cli_describe.register(app)
cli_campaign.register(app)
cli_tune.register(app)
cli_alert.register(app)
cli_power.register(app)


InventoryArg = Annotated[
    Path | None, typer.Argument(help="hosts.yaml to use (default: the shipped embedded one).")
]


@hosts_app.command("check")
def hosts_check(file: InventoryArg = None) -> None:
    """Validate hosts.yaml, then connect to every host and report what a campaign needs."""
    from lab.config import load_inventory
    from lab.probe import probe_all

    inventory = guarded(lambda: load_inventory(file))
    table = Table(title=f"hosts in {file or 'the embedded default'}")
    for column in ("host", "transport", "reachable", "docker", "free GB", "clock offset s"):
        table.add_column(column)
    reports = probe_all(inventory.hosts)
    for config, report in zip(inventory.hosts, reports, strict=True):
        table.add_row(
            report.name,
            config.transport,
            "yes" if report.reachable else "[red]no[/]",
            shown(report.docker),
            f"{report.free_gb:.1f}" if report.free_gb is not None else "?",
            f"{report.clock_offset_s:+.3f}" if report.clock_offset_s is not None else "?",
        )
    out.print(table)
    problems = [p for r in reports for p in r.problems]
    for problem in problems:
        err.print(f"[yellow]problem:[/] {shown(problem)}", highlight=False, soft_wrap=True)
    if any(not r.reachable for r in reports):
        raise typer.Exit(3)
    out.print(f"{len(reports)} host(s) reachable"
              + (f", {len(problems)} problem(s) to look at." if problems else ", all fit."))


def main() -> None:
    """Entry point of the `subrun` console script."""
    app()
