"""How collectors run their read-only commands: C locale, no check, a short deadline."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from lab.host import CommandResult, Host

PROBE_TIMEOUT_S = 60.0
C_LOCALE = {"LC_ALL": "C"}  # lscpu, dmidecode and ethtool translate their labels otherwise


class Facts(BaseModel):
    """Base of every collector's model: plain values, frozen once parsed."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def run_probe(host: Host, argv: Sequence[str], *, timeout_s: float = PROBE_TIMEOUT_S,
              env: dict[str, str] | None = None) -> CommandResult:
    """Run a read-only probe; a missing tool or a refusal is a result to judge, not an error."""
    return host.run(list(argv), check=False, timeout_s=timeout_s, env={**C_LOCALE, **(env or {})})


def output_or_empty(result: CommandResult) -> str:
    """stdout of a probe that succeeded, else "" (the parser then has less to go on)."""
    return result.stdout if result.ok else ""


def is_missing(result: CommandResult) -> bool:
    """True when the command itself is not installed on the host."""
    return result.exit_status == 127 or "command not found" in result.stderr


def why_failed(result: CommandResult) -> str:
    """A short reason a probe failed, for the gap it leaves in the description."""
    if is_missing(result):
        return f"`{result.argv[0]}` is not installed on host '{result.host}'"
    last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
    return f"`{result.command}` exited {result.exit_status} on host '{result.host}': {last[0]}"
