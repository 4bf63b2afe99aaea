"""One root exception for everything an operator may see, and the few kinds below it.

Each message is written to be read on its own: it names the file, field, host or run at fault
and says what to do next. Foreign exceptions are translated at the seam and chained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.host import CommandResult


class SubrunError(Exception):
    """Root of every error subrun reports to a person; the message is the whole explanation."""

    exit_code = 1


class ConfigError(SubrunError):
    """A file a person wrote (hosts.yaml, a campaign, a benchmark manifest) is wrong."""

    exit_code = 2


class ConnectError(SubrunError):
    """A host could not be reached, or refused us (address, key, host key)."""

    exit_code = 3


class ConnectionLost(SubrunError):
    """The link to a host dropped while a command ran; the command is not re-run."""

    exit_code = 3

    def __init__(self, message: str, *, host: str, argv: tuple[str, ...]) -> None:
        super().__init__(message)
        self.host = host
        self.argv = argv


class CommandFailed(SubrunError):
    """A command ran and exited non-zero; carries its result so the output tail can be shown."""

    def __init__(self, result: CommandResult, message: str | None = None) -> None:
        super().__init__(message or _describe_failure(result))
        self.result = result


class CommandTimedOut(CommandFailed):
    """A command ran past its deadline and was stopped."""


class ImageError(SubrunError):
    """A benchmark image could not be built, shipped or started."""


class PowerError(SubrunError):
    """The power analyzer, its daemon or the power director failed."""


class RunError(SubrunError):
    """A benchmark run failed or could not be judged."""


class RunCancelled(SubrunError):
    """The campaign's flow run was cancelled: the run was stopped, or never started; it runs
    again when the campaign starts again."""


class TransferFailed(SubrunError):
    """A file could not be copied because of the file itself (missing, unreadable, not a
    regular file, over a size cap), not because of the link: copying again cannot help."""


class CollectionRefused(RunError):
    """A run's output on its target is malformed or hostile (a path leaving the run's folder,
    a symlink, too many or too large files): the run failed for good and is never retried."""


def _describe_failure(result: CommandResult) -> str:
    tail = result.tail(15)
    shown = f"\n--- last lines of its output ---\n{tail}" if tail else ""
    return (
        f"On host '{result.host}', `{result.command}` exited with status {result.exit_status} "
        f"after {result.duration_s:.1f} s.{shown}"
    )
