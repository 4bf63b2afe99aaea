"""What every command shares: the consoles, and turning a SubrunError into one clear paragraph."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from lab.errors import SubrunError

if TYPE_CHECKING:
    from lab.config import Inventory

out = Console()
err = Console(stderr=True)
T = TypeVar("T")


def guarded(fn: Callable[[], T]) -> T:
    """Run fn; a SubrunError is printed as its message and exits with its code, no traceback."""
    try:
        return fn()
    except SubrunError as e:
        # the message may quote a file's own text, such as a key `[/]`: never read as markup
        err.print(f"[bold red]error:[/] {shown(str(e))}", highlight=False, soft_wrap=True)
        raise typer.Exit(e.exit_code) from None


def keep_off_local_runs(inventory: Inventory, source: Path) -> None:
    """Move the controller, and the Prefect API it starts afterwards, off the cores a
    `transport: local` host pins its runs to, so they do not compete with the SUT there."""
    from lab.cores import core_list, keep_off, local_run_cores

    pinned = guarded(lambda: local_run_cores(inventory, source))
    kept = keep_off(pinned)
    if kept:
        err.print(f"[dim]The controller runs on cores {core_list(kept)}, off cores "
                  f"{core_list(pinned)} of this machine's runs.[/]", highlight=False)


def plain(text: str) -> str:
    """text with every control or formatting character but the newline written as an escape,
    so that a file's bytes cannot move the cursor, recolour or reorder the terminal."""
    return "".join(c if c == "\n" or c.isprintable() else c.encode("unicode_escape").decode()
                   for c in text)


def shown(text: object) -> str:
    """text as rich prints it literally: files and targets decide what it says, not how."""
    return escape(plain(str(text)))


@contextmanager
def progress_bar(title: str, total: int) -> Iterator[None]:
    """A bar on stderr for a campaign's runs, with a line per run as it ends (or waits), fed
    by the flow's progress steps while the body runs."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flows import progress

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err) as bar:
        job = bar.add_task(title, total=total)

        def advance(step: progress.Step) -> None:
            colour = {"passed": "green", "waiting": "yellow", "probe": "cyan", "tuned": "green",
                      "kept": "green", "skipped": "yellow"}.get(step.outcome, "red")
            bar.console.print(f"[{colour}]{step.outcome:>6}[/] {shown(step.label)}",
                              highlight=False)
            if step.counts:
                bar.update(job, completed=step.done)

        progress.listen(advance)
        try:
            yield
        finally:
            progress.unlisten(advance)
