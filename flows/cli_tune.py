"""`subrun tune CAMPAIGN` (the tuning step alone) and `subrun tune --show` (the tuning book)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flows.cli_campaign import CampaignArg, _load
from flows.cli_common import guarded, out, progress_bar, shown
from flows.environment import configure_prefect
from flows.private_api import flow_run_settings, private_api, wait_ready

STATE_STYLE = {"tuned": "green", "kept": "green", "skipped": "yellow", "failed": "red",
               "current": "green", "stale": "dim", "under way": "yellow"}


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)


def tune_command(
        campaign: CampaignArg = None,
        show: Annotated[bool, typer.Option("--show", help="Print the tuning book (current and "
                                           "stale records) instead of tuning.")] = False,
        output: Annotated[Path | None, typer.Option(
            "--output", help="With --show: the output folder whose tuning/ to print (default: "
                             "the campaign's output_dir).")] = None,
        again: Annotated[bool, typer.Option(help="Start every search over, even where a "
                                            "current record exists.")] = False) -> None:
    """Find each host's LoadGen targets (Offline and Server target_qps, stream latencies) with
    short probe runs, and keep them for the campaign's runs; exit 1 if a search failed."""
    if show:
        show_book(campaign, output)
        return
    configure_prefect()
    with private_api():  # boots while the campaign is read and checked, as for `subrun run`
        _tune(campaign, again)


def _tune(campaign: Path | None, again: bool) -> None:
    from bench.tuning_use import triples
    from flows.tuning import tuning

    ctx = _load(campaign)  # validate before Prefect starts
    total = sum(1 for _ in triples(ctx.campaign, ctx.manifests))
    ctx.close()
    guarded(wait_ready)
    with progress_bar(f"tuning {ctx.campaign.name}", total), flow_run_settings():
        rows = guarded(lambda: tuning(campaign_file=str(campaign) if campaign else None,
                                      again=again))
    table = Table(title=f"tuning of campaign {ctx.campaign.name} ({ctx.campaign.paths.tuning})")
    for column in ("host", "benchmark", "scenario", "state", "probes", "found", "chosen",
                   "cost"):
        table.add_column(column)
    for row in rows:
        r = row.record
        probes = f"{len(r.probes)} ({sum(p.valid for p in r.probes)} VALID)" if r else ""
        found = f"{r.found:.4g}" if r and r.found else ""
        chosen = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in r.chosen.items()) \
            if r else ""
        style = STATE_STYLE.get(row.state, "red")
        table.add_row(row.host, row.benchmark, row.scenario, f"[{style}]{row.state}[/]", probes,
                      found, shown(chosen), f"{r.cost_s:.0f} s" if r else "")
    out.print(table)
    for row in rows:
        if row.state in ("failed", "skipped"):
            out.print(f"[{STATE_STYLE[row.state]}]{row.state}:[/] {shown(row.label)}: "
                      f"{shown(row.detail)}", highlight=False)
    if any(row.state == "failed" for row in rows):
        raise typer.Exit(1)


def show_book(campaign: Path | None, output: Path | None) -> None:
    """Every record of the book: the newest finished one of each host x benchmark x scenario
    is current (a campaign checks it against the host's image, LoadGen and round), the older
    ones stale, and a search not finished is under way."""
    from bench.tuning_record import TuningBook

    if output is not None:
        book = TuningBook(output / "tuning")
    else:
        book = TuningBook(_load(campaign).campaign.paths.tuning)
    records = guarded(book.records)
    table = Table(title=f"tuning book {book.root}")
    for column in ("search", "state", "image, LoadGen, round", "probes", "found", "chosen",
                   "cost", "finished"):
        table.add_column(column)
    newest = {}
    for r in records:
        if r.done:
            newest[(r.host, r.benchmark, r.scenario)] = r.key
    for r in records:
        state = "under way" if not r.done else \
            "current" if newest.get((r.host, r.benchmark, r.scenario)) == r.key else "stale"
        chosen = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in r.chosen.items())
        made = f"{r.image_digest.removeprefix('sha256:')[:12]}, " \
               f"{r.loadgen_version.split(' @')[0]}, {r.round}"
        table.add_row(f"{r.host}/{r.benchmark}/{r.scenario.value}",
                      f"[{STATE_STYLE[state]}]{state}[/]", shown(made),
                      f"{len(r.probes)} ({sum(p.valid for p in r.probes)} VALID)",
                      f"{r.found:.4g}" if r.found else "", shown(chosen),
                      f"{r.cost_s:.0f} s", f"{r.done_at:%Y-%m-%d %H:%M}" if r.done_at else "")
    out.print(table)
    if not records:
        out.print(f"No tuning records under {book.root} yet: `subrun tune CAMPAIGN`, or "
                  "`tune: auto` in a campaign.")
