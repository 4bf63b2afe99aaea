"""`subrun alert`: tell a webhook about nightly regressions (chat, pager, a ticket system).

The nightly deployment already emits `subrun.nightly.regression` events for Prefect automations;
this command serves labs that post from cron or from an automation's shell action instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.campaign import DEFAULT_OUTPUT, HISTORY_FILE
from flows.cli_common import guarded, out, shown

DEFAULT_HISTORY = DEFAULT_OUTPUT / HISTORY_FILE


def register(app: typer.Typer) -> None:
    """Add `alert` to the subrun command line."""
    app.command("alert")(alert_command)


def alert_command(
        webhook: Annotated[str, typer.Option(help="URL that receives one JSON POST per "
                                             "regression (http:// or https://).")],
        history: Annotated[Path, typer.Option(help="The nightly history (subrun run --history "
                                              "writes it).")] = DEFAULT_HISTORY,
        threshold: Annotated[float, typer.Option(help="Percent worse than the median of earlier "
                                                 "nights that counts as a regression.")] = 5.0,
) -> None:
    """Post each nightly regression beyond the threshold to a webhook (exit 1 if any)."""
    from submission.alert import post_json, regression_notice
    from submission.history import regressions

    if not history.is_file():
        out.print(f"No history at {history}: nothing to compare yet.")
        return
    found = regressions(history, threshold_pct=threshold)
    for regression in found:
        notice = regression_notice(regression)
        guarded(lambda: post_json(webhook, notice))  # noqa: B023 (called at once)
        out.print(f"[red]regression:[/] {shown(regression.describe())}", highlight=False)
    if not found:
        out.print(f"No regression beyond {threshold:g} % in {history}.")
        return
    raise typer.Exit(1)
