"""`subrun describe HOST`: the system description of one host, with where each value came from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from bench.run import Mode
from collectors.system_json import FieldSource, SystemDescription

_STYLE = {"detected": "green", "configured": "cyan", "default": "dim", "missing": "bold red"}


def register(app: typer.Typer) -> None:
    """Add the `describe` command to the subrun command line."""
    app.command("describe")(describe_command)


def describe_command(
    host: Annotated[str, typer.Argument(help="Name of the host in hosts.yaml.")],
    inventory: Annotated[Path | None, typer.Option(
        "--inventory", "-i", help="hosts.yaml to use (default: the shipped embedded one).")] = None,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Directory for <host>.json and <host>.sources.json.")
    ] = Path("systems"),
    image: Annotated[list[str] | None, typer.Option(
        "--image", help="Benchmark image to read the software stack from (repeatable).")] = None,
) -> None:
    """Detect a host's system description, merge hosts.yaml, print it and write the JSON."""
    from collectors.describe import describe
    from collectors.preflight import preflight
    from collectors.system_json import write
    from flows.cli_common import err, guarded, shown
    from flows.cli_common import out as console
    from lab.config import load_inventory

    inv = guarded(lambda: load_inventory(inventory))
    description = guarded(lambda: describe(inv, host, images=image or ()))
    console.print(_table(description))
    system_path, sources_path = write(description, out)
    console.print(f"wrote {system_path} and {sources_path}", highlight=False)
    problems = preflight([description], Mode.SHORT, inventory)
    for problem in problems:
        err.print(f"[yellow]to fix:[/] {shown(problem)}", highlight=False, soft_wrap=True)
    if not image:
        err.print("hint: pass --image IMAGE (the benchmark image) to read the framework and "
                  "libraries from the image itself.", highlight=False, soft_wrap=True)
    verdict = (f"{len(problems)} field(s) to fix before a submission campaign."
               if problems else "Ready for a submission campaign.")
    console.print(verdict, highlight=False)


def _table(description: SystemDescription) -> Table:
    table = Table(title=f"system description of host '{description.host}'")
    for column in ("field", "value", "source"):
        table.add_column(column, overflow="fold")
    for field, value in description.system.items():
        table.add_row(field, Text(str(value)), _source_text(description.sources[field]))
    return table


def _source_text(source: FieldSource) -> Text:
    # Text, not markup: values and notes may hold brackets ("[N/A]").
    text = Text(source.source, style=_STYLE[source.source])
    if source.source != "default":
        text.append(f" ({source.origin})")
    return text.append(f": {source.note}" if source.note else "")
