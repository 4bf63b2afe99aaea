"""`subrun power status|stop`: the analyzer daemons campaigns leave running, seen and stopped.

A campaign leaves subrun's daemon for each analyzer it used running, so the next campaign reuses
it; these commands show what runs for each analyzer of a hosts.yaml and stop it (power.daemons).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flows.cli_common import err, guarded, out, shown

power_app = typer.Typer(no_args_is_help=True,
                        help="See and stop the power analyzers' daemons campaigns left running.")

InventoryArg = Annotated[
    Path | None, typer.Argument(help="hosts.yaml to use (default: the shipped embedded one).")
]
AnalyzerOpt = Annotated[
    list[str] | None, typer.Option("--analyzer", "-a",
                                   help="Only this analyzer (repeat for more; default: all).")
]


def register(app: typer.Typer) -> None:
    """Add `power status` and `power stop` to the subrun command line."""
    app.add_typer(power_app, name="power")


@power_app.command("status")
def status_command(file: InventoryArg = None, analyzer: AnalyzerOpt = None) -> None:
    """List each analyzer's daemon (and power-dev server): where it listens, running or not."""
    from lab.config import load_inventory
    from power.daemons import daemon_states

    inventory = guarded(lambda: load_inventory(file))
    states = guarded(lambda: daemon_states(inventory, analyzer))
    if not states:
        out.print(f"No analyzer in {file or 'the embedded hosts.yaml'} (`analyzers:`).")
        return
    table = Table(title=f"power analyzers in {file or 'the embedded default'}")
    for column in ("analyzer", "process", "host", "listens on", "state"):
        table.add_column(column)
    for state in states:
        table.add_row(state.analyzer, state.kind, state.host, state.endpoint,
                      "[red]unknown[/]" if state.problem else shown(state.state))
    out.print(table)
    for state in states:
        if state.problem:
            err.print(f"[yellow]problem:[/] host '{state.host}': {shown(state.problem)}",
                      highlight=False, soft_wrap=True)


@power_app.command("stop")
def stop_command(file: InventoryArg = None, analyzer: AnalyzerOpt = None) -> None:
    """Stop the analyzers' running daemons and power-dev servers (a campaign starts them again)."""
    from lab.config import load_inventory
    from power.daemons import stop_daemons

    inventory = guarded(lambda: load_inventory(file))
    stopped = guarded(lambda: stop_daemons(inventory, analyzer))
    for state in stopped:
        out.print(f"stopped: {state.analyzer}'s {state.kind} on host '{state.host}' "
                  f"(pid {state.handle.pid if state.handle else '?'}, {state.endpoint})",
                  highlight=False)
    if not stopped:
        out.print("Nothing was running.")
