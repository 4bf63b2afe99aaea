"""Judge a finished run the moment its logs arrive: passed or not, why, and what to do.

The checks are those of the official checker's PerformanceCheck and AccuracyCheck (checker.md
§3-4), plus what the checker skips but the rules require: the run must be VALID, the detail log
free of LoadGen errors, and a compliance run must show that LoadGen applied audit.config. A
short-mode run that is only short of official durations or counts passes but is not submittable.
An INVALID Offline or Server run gets `rerun_settings` with a target QPS derived from what it
measured, so the campaign can re-run it automatically (a bounded number of times).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bench import checks
from bench.checks import CheckResult, Context
from bench.compliance import ComplianceResult
from bench.loadgen_log import (
    ACCURACY_TXT,
    DETAIL,
    SUMMARY,
    DetailLog,
    SummaryLog,
    locate_logs,
    read_detail,
    read_summary,
)
from bench.rules import RoundRules, load_rules
from bench.run import Check, Mode, RunKind, RunSpec, Verdict
from lab.errors import RunError


class RunFiles(BaseModel):
    """What a verdict reads from a finished run."""

    model_config = ConfigDict(frozen=True)

    logs_dir: str = ""
    detail: DetailLog | None = None
    summary: SummaryLog | None = None
    accuracy_text: str | None = None
    problem: str = ""  # why the detail log could not be read, when it could not


def load_run_files(run_dir: Path) -> RunFiles:
    """Read the logs of a run from its directory (the logs may sit in `output/`); an unreadable
    log becomes a `problem` for the verdict to report, not an exception."""
    logs = locate_logs(Path(run_dir))
    detail, problem = None, ""
    if (logs / DETAIL).is_file():
        try:
            detail = read_detail(logs / DETAIL)
        except RunError as e:
            problem = str(e)
    summary = read_summary(logs / SUMMARY) if (logs / SUMMARY).is_file() else None
    accuracy = logs / ACCURACY_TXT
    return RunFiles(logs_dir=str(logs), detail=detail, summary=summary, problem=problem,
                    accuracy_text=accuracy.read_text(errors="replace") if accuracy.is_file()
                    else None)


def judge_dir(spec: RunSpec, run_dir: Path, rules: RoundRules | None = None, *,
              compliance: ComplianceResult | None = None) -> Verdict:
    """Judge the run whose files are in run_dir (a run-store attempt or a run's output)."""
    return judge(spec, load_run_files(run_dir), rules, compliance=compliance)


def judge(spec: RunSpec, files: RunFiles, rules: RoundRules | None = None, *,
          compliance: ComplianceResult | None = None) -> Verdict:
    """Judge a finished run from its parsed files against its round's rules."""
    rules = rules or load_rules(spec.round)
    if files.detail is None:
        where = files.logs_dir or "the run directory"
        reason = files.problem or (f"The run left no {DETAIL} in {where}: LoadGen did not run, "
                                   "or its logs were not collected.")
        return Verdict(passed=False, submittable=False,
                       checks=[Check(name="detail_log", ok=False, detail=reason)],
                       reason=reason,
                       fix="Look at the run's output tail; check that the harness writes its "
                           "logs to the output directory, then re-run.")
    ctx = Context(spec=spec, log=files.detail, rules=rules, model=rules.model(spec.model),
                  accuracy_text=files.accuracy_text)
    results = [f for check in checks.for_kind(spec.kind) for f in check(ctx)]
    if compliance is not None:
        results.append(CheckResult(Check(name="compliance", ok=compliance.passed,
                                      detail=compliance.reason or "verification passed"),
                                fix=compliance.fix))
    return _verdict(spec, results, ctx)


def _verdict(spec: RunSpec, results: list[CheckResult], ctx: Context) -> Verdict:
    failing = [f for f in results if not f.check.ok]
    fixes = list(dict.fromkeys(f.fix for f in failing if f.fix))
    adjusted = next((f.rerun_settings for f in failing if f.rerun_settings), None)
    short = spec.mode is Mode.SHORT
    mode_check = Check(name="mode", ok=True, detail="short mode: not submittable" if short
                       else "submission mode")
    submittable = not failing and not short and not any(f.not_submittable for f in results)
    return Verdict(
        passed=not failing,
        checks=[mode_check, *(f.check for f in results)],
        reason="; ".join(f.check.detail for f in failing),
        fix=" ".join(fixes),
        rerun_settings=adjusted,
        metrics=checks.metrics(ctx) if spec.kind is not RunKind.ACCURACY
        else checks.accuracy_metrics(ctx),
        submittable=submittable,
    )
