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
    """A host could not be reached, or refused us (address, key, host key). Reaching it again
    later may work, unless it is one of the final kinds below."""

    exit_code = 3


class AccessRefused(ConnectError):
    """The host answered but refused us, or we refused it (host key, user key, unknown name):
    final, since trying again cannot change a key."""


class LinkDown(ConnectError):
    """A link that was up dropped and did not come back within one reconnection window; the
    host's outage budget is not spent yet, so trying again later is worth it."""


class HostUnreachable(ConnectError):
    """A host stayed unreachable for its whole outage budget (`outage_budget_s` in hosts.yaml):
    final for this campaign, whose other hosts carry on."""


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


class NotCompared(RunError):
    """A compliance test was not run: the run it is compared with never passed, so there is no
    load to run it at and nothing to compare it with."""


class RunCancelled(SubrunError):
    """The campaign's flow run was cancelled: the run was stopped, or never started; it runs
    again when the campaign starts again."""


class TransferFailed(SubrunError):
    """A file could not be copied because of the file itself (missing, unreadable, not a
    regular file, over a size cap), not because of the link: copying again cannot help."""


class CollectionRefused(RunError):
    """A run's output on its target is malformed or hostile (a path leaving the run's folder,
    a symlink, too many or too large files): the run failed for good and is never retried."""


FINAL = (AccessRefused, HostUnreachable)
LINK_FAULTS = (ConnectError, ConnectionLost)
TRANSIENT = (*LINK_FAULTS, CommandTimedOut)


def is_link_fault(fault: BaseException | None) -> bool:
    """Whether the link to a host failed rather than the work on it: what was started on the
    target goes on, so its attempt is left running (and its power measured) to be reattached
    later, even when the host is given up for this campaign (HostUnreachable, AccessRefused)."""
    return isinstance(fault, LINK_FAULTS)


def is_transient(fault: BaseException | None) -> bool:
    """Whether trying again later may succeed: a dropped or unreachable link, a command that
    ran out of time; never a refused key, a spent outage budget, a file that cannot be copied,
    or a wrong result. Prefect's retries of a task ask this and nothing else."""
    return isinstance(fault, TRANSIENT) and not isinstance(fault, FINAL)


def _describe_failure(result: CommandResult) -> str:
    tail = result.tail(15)
    shown = f"\n--- last lines of its output ---\n{tail}" if tail else ""
    return (
        f"On host '{result.host}', `{result.command}` exited with status {result.exit_status} "
        f"after {result.duration_s:.1f} s.{shown}"
    )
