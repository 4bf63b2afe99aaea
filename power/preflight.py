"""Checks before any power run: who must be reachable, answering, identified and in time.

Each check is a `bench.run.Check`; `PreflightReport.raise_for_failure` turns the failed ones
into one PowerError that says what to fix. Clock offsets are measured through the Host
contract (`date +%s.%N` bracketed by the controller's clock, best of three), so the SUT, the
director and the daemon's host are compared against one reference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.run import Check
from lab.errors import PowerError, SubrunError
from lab.host import Host
from power.client import Identity
from power.instrument import MODELS

# power-dev refuses more than 400 ms between client and server clocks (time_sync.py), and
# the checker allows 800 ms between their phase stamps; hold the stricter of the two.
CLOCK_LIMIT_S = 0.4


@dataclass(frozen=True)
class ClockReading:
    """A host's clock against the controller's: offset and the measurement's half-width."""

    host: str
    offset_s: float
    uncertainty_s: float


@dataclass
class PreflightReport:
    """The checks made before a power run."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        """Record one check; returns ok."""
        self.checks.append(Check(name=name, ok=ok, detail=detail))
        return ok

    def attempt(self, name: str, action: Callable[[], str]) -> bool:
        """Record the outcome of action: its text when it returns, its error when it raises."""
        try:
            return self.add(name, True, action())
        except SubrunError as e:
            return self.add(name, False, str(e))

    def raise_for_failure(self, run: str) -> None:
        """Raise one PowerError naming every failed check."""
        failed = [c for c in self.checks if not c.ok]
        if failed:
            lines = "\n".join(f"- {c.name}: {c.detail}" for c in failed)
            raise PowerError(f"Power pre-flight for '{run}' failed; nothing was measured:\n"
                             f"{lines}")


def clock_offset(host: Host, tries: int = 3) -> ClockReading:
    """The host clock minus the controller clock, from the quickest of a few round trips."""
    best: ClockReading | None = None
    for _ in range(tries):
        before = time.time()
        result = host.run(["date", "+%s.%N"], timeout_s=30)
        after = time.time()
        try:
            remote = float(result.stdout.strip())
        except ValueError as e:
            raise PowerError(f"Host '{host.name}' printed {result.stdout.strip()!r} for "
                             "`date +%s.%N`; a GNU date is needed to measure its clock.") from e
        reading = ClockReading(host.name, remote - (before + after) / 2, (after - before) / 2)
        if best is None or reading.uncertainty_s < best.uncertainty_s:
            best = reading
    assert best is not None
    return best


def check_clocks(report: PreflightReport, sut: Host, other: Host, role: str,
                 limit_s: float = CLOCK_LIMIT_S) -> None:
    """Record whether the SUT's clock and the other host's agree within limit_s."""
    try:
        a, b = clock_offset(sut), clock_offset(other)
    except SubrunError as e:
        report.add(f"clock offset SUT vs {role}", False, str(e))
        return
    skew = a.offset_s - b.offset_s
    within_ms = 1000 * max(a.uncertainty_s, b.uncertainty_s)
    detail = (f"{sut.name} {a.offset_s * 1000:+.0f} ms, {other.name} {b.offset_s * 1000:+.0f} ms "
              f"against the controller (measured within {within_ms:.0f} ms); skew "
              f"{skew * 1000:+.0f} ms, limit {limit_s * 1000:.0f} ms")
    if abs(skew) > limit_s:
        detail += "; synchronise both with NTP (chrony or ntpd) and retry"
    report.add(f"clock offset SUT vs {role}", abs(skew) <= limit_s, detail)


def check_reachable(report: PreflightReport, host: Host, role: str) -> bool:
    """Record whether host runs a trivial command."""
    def action() -> str:
        result = host.run(["true"], timeout_s=30)
        return f"'{host.name}' answered in {result.duration_s * 1000:.0f} ms"

    return report.attempt(f"{role} reachable", action)


def check_identity(report: PreflightReport, identity: Identity, model: str) -> None:
    """Record whether the daemon drives the analyzer model hosts.yaml names."""
    expected = MODELS[model].ptd_name if model in MODELS else f"Yokogawa{model}"
    ok = identity.model == expected
    detail = f"Identify: {identity.reply}"
    if not ok:
        detail += (f"; expected {expected}: fix `model:` of the analyzer in hosts.yaml or "
                   "connect the right instrument")
    report.add("analyzer identity", ok, detail)
