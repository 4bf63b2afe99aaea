"""What a run and a whole campaign come to: the values the flow returns and the CLI, events,
states and deployments read, by attribute rather than by string key.

Both are small frozen values, so Prefect can keep them as results (a task run's, a flow run's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bench.plan_record import HostActual
from bench.run import RunRecord, RunState
from bench.submitted import passed


@dataclass(frozen=True)
class RunOutcome:
    """What the flow needs to know of a finished run."""

    label: str
    key: str
    attempt: int
    state: RunState
    passed: bool
    reason: str
    metrics: Mapping[str, float] = field(default_factory=dict)  # the verdict's, for events
    flags: tuple[str, ...] = ()  # telemetry (throttled, contended): warnings, not failures

    @classmethod
    def of(cls, record: RunRecord) -> RunOutcome:
        """The outcome of one attempt, from its record."""
        verdict = record.verdict
        reason = record.error or (verdict.reason if verdict else "")
        flags = tuple(n for n in ("throttled", "contended") if getattr(record.telemetry, n, False))
        return cls(record.spec.label, record.key, record.attempt, record.state, passed(record),
                   reason, dict(verdict.metrics) if verdict else {}, flags)


@dataclass(frozen=True)
class CampaignOutcome:
    """A campaign's result: how many runs passed, which failed or did not run, and where the
    tree, its report and its tarball are."""

    campaign: str
    runs: int  # planned
    passed: int
    failed: tuple[str, ...] = ()  # "label: reason" of every run that ended without passing
    not_run: int = 0  # planned runs that never ended (cancelled, host given up, an error)
    not_run_reasons: Mapping[str, str] = field(default_factory=dict)  # label -> why
    tree: str = ""
    report: str = ""  # report.html
    precheck: str = ""  # the prechecks' one-line summary
    tarball: str | None = None  # None: no result made it into a tree
    host_times: tuple[HostActual, ...] = ()  # estimated vs actual wall time per host

    @property
    def all_passed(self) -> bool:
        """Every planned run passed: the one condition for a Completed campaign."""
        return not self.failed and not self.not_run and self.passed >= self.runs

    @property
    def message(self) -> str:
        """One line: how many passed, and which runs failed or did not run."""
        line = f"campaign {self.campaign}: {self.passed}/{self.runs} runs passed"
        if self.failed:
            line += "; failed: " + "; ".join(self.failed)
        if self.not_run:
            line += f"; {self.not_run} run(s) did not run"
        return line


@dataclass(frozen=True)
class TrainingOutcome:
    """A training campaign's result: its runs, each system's olympic score beside
    result_summarizer's ("system/benchmark" -> minutes), and the package checker's verdict."""

    campaign: str
    runs: int  # planned
    passed: int
    failed: tuple[str, ...] = ()  # "label: verdict line" of every run that did not pass
    not_run: int = 0
    given_up: Mapping[str, str] = field(default_factory=dict)  # host -> why
    scores: Mapping[str, float] = field(default_factory=dict)
    official_scores: Mapping[str, float | None] = field(default_factory=dict)
    package: str = ""
    package_passed: bool = False
    package_errors: tuple[str, ...] = ()
    report: str = ""

    @property
    def all_passed(self) -> bool:
        """Every run passed and the package checker accepted the package."""
        return self.package_passed and not self.failed and not self.not_run

    @property
    def message(self) -> str:
        checker = "passed" if self.package_passed else "FAILED"
        return (f"training campaign {self.campaign}: {self.passed}/{self.runs} runs passed; "
                f"package checker {checker}")
