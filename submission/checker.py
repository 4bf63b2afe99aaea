"""The official MLCommons submission checker, run from a checkout of mlcommons/inference.

`python3 <checkout>/tools/submission/submission_checker/main.py --input <tree> --version <round>
--csv <file>` (reference/checker.md §8). Its verdict is the exit status together with the last
`SUMMARY:` line; a Python traceback means one of the crash cases of §8.3 and is a failure even if
the exit status were 0. Log lines have the form `[time file:line LEVEL] message`; each error is
attributed to the result folder (`results/<system>/<model>/<scenario>`) its message names.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from lab.errors import CommandTimedOut, ConfigError, RunError
from lab.local import LocalHost

ENV_REPO = "SUBRUN_INFERENCE_REPO"
MAIN = Path("tools/submission/submission_checker/main.py")
LOG_LINE = re.compile(r"^\[(?P<time>[^\]]*?) (?P<file>[\w.]+):(?P<line>\d+) (?P<level>[A-Z]+)\] "
                      r"(?P<message>.*)$")
RESULT_PATH = re.compile(r"results/(?P<result>[^/\s]+/[^/\s]+/[^/\s]+)")
COUNTS = re.compile(r"Results=(\d+), NoResults=(\d+), Power Results=(\d+)")


class CheckerMessage(BaseModel):
    level: str
    source: str  # checker file:line
    message: str
    result: str = ""  # "<system>/<model>/<scenario>" when the message names one


class CheckerOutcome(BaseModel):
    """What the official checker said about a tree."""

    ok: bool
    exit_status: int
    summary: str = ""  # the SUMMARY line, empty when it never got there
    crashed: bool = False
    traceback: str = ""
    results: dict[str, str] = Field(default_factory=dict)  # result -> metric, valid ones
    no_results: list[str] = Field(default_factory=list)  # results that failed
    counts: dict[str, int] = Field(default_factory=dict)
    errors: list[CheckerMessage] = Field(default_factory=list)
    warnings: list[CheckerMessage] = Field(default_factory=list)
    csv_rows: list[dict[str, str]] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list)
    log_path: str = ""  # the checker's full output, kept next to the tree

    def errors_for(self, result: str) -> list[str]:
        """The error messages that name one result ("<system>/<model>/<scenario>")."""
        return [e.message for e in self.errors if e.result == result]


def inference_repo_from_env() -> Path | None:
    """The checkout named by SUBRUN_INFERENCE_REPO, or None when unset."""
    value = os.environ.get(ENV_REPO, "").strip()
    return Path(value) if value else None


def checker_command(inference_repo: Path, tree: Path, version: str, csv_path: Path,
                    python: str = sys.executable) -> list[str]:
    """The argv that runs the official checker on tree for one round."""
    main = Path(inference_repo) / MAIN
    if not main.is_file():
        raise ConfigError(f"{inference_repo} is not a checkout of mlcommons/inference: {MAIN} is "
                          f"missing. Point `inference_repo:` (or ${ENV_REPO}) at the root of a "
                          "checkout, e.g. `git clone https://github.com/mlcommons/inference`.")
    return [python, str(main), "--input", str(tree), "--version", version, "--csv", str(csv_path)]


def run_checker(tree: Path, inference_repo: Path, version: str, *, work_dir: Path,
                timeout_s: float = 900.0) -> CheckerOutcome:
    """Run the official checker on tree with --version; keep its log and CSV in work_dir."""
    work_dir.mkdir(parents=True, exist_ok=True)
    csv_path = work_dir / "checker_summary.csv"
    csv_path.unlink(missing_ok=True)
    argv = checker_command(inference_repo, tree, version, csv_path)
    try:
        done = LocalHost("controller", str(work_dir)).run(
            argv, check=False, timeout_s=timeout_s, cwd=str(work_dir))
    except CommandTimedOut as e:
        raise RunError(f"The official checker did not finish within {timeout_s:.0f} s on {tree}; "
                       "its last output:\n" + e.result.tail(10)) from e
    log_path = work_dir / "checker.log"
    log_path.write_text(done.stdout + done.stderr)
    csv_text = csv_path.read_text() if csv_path.exists() else None
    outcome = parse_checker_output(done.stdout + "\n" + done.stderr, done.exit_status, csv_text)
    return outcome.model_copy(update={"command": argv, "log_path": str(log_path)})


def parse_checker_output(text: str, exit_status: int, csv_text: str | None) -> CheckerOutcome:
    """Read the checker's log (stdout + stderr), exit status and CSV into an outcome."""
    errors: list[CheckerMessage] = []
    warnings: list[CheckerMessage] = []
    results: dict[str, str] = {}
    no_results: list[str] = []
    summary, counts = "", {}
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if not m:
            continue
        message, level = m["message"], m["level"]
        where = RESULT_PATH.search(message)
        entry = CheckerMessage(level=level, source=f"{m['file']}:{m['line']}", message=message,
                               result=where["result"] if where else "")
        if message.startswith("SUMMARY:"):
            summary = message
        elif message.startswith("Results ") and where:
            results[entry.result] = message.rsplit(" ", 1)[-1]
        elif message.startswith("NoResults ") and where:
            no_results.append(entry.result)
        elif c := COUNTS.search(message):
            counts = {"results": int(c[1]), "no_results": int(c[2]), "power_results": int(c[3])}
        elif level in ("ERROR", "CRITICAL"):
            errors.append(entry)
        elif level == "WARNING":
            warnings.append(entry)
    tb_at = text.find("Traceback (most recent call last):")
    traceback = text[tb_at:].strip() if tb_at >= 0 else ""
    crashed = bool(traceback) or not summary
    rows = list(csv.DictReader(io.StringIO(csv_text))) if csv_text else []
    ok = exit_status == 0 and not crashed and summary.endswith("looks OK")
    return CheckerOutcome(ok=ok, exit_status=exit_status, summary=summary, crashed=crashed,
                          traceback=traceback, results=results, no_results=no_results,
                          counts=counts, errors=errors, warnings=warnings, csv_rows=rows)
