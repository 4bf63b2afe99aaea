"""A training run's mllog file: the ruleset's compliance checker on it, and the facts it holds.

The verdict on the log is `mlperf_logging`'s compliance checker, run in this process on the
ruleset's `common.yaml` (which pulls in the division's and the benchmark's rules from the log's
own submission keys); subrun only reads off what the checkers and the summarizer read: time to
train is run_stop minus run_start (result_summarizer's score, in minutes), epochs are the
`epoch_num` of the last `eval_accuracy`, and the run converged when run_stop says `success`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.compliance_checker.mlp_parser import parse_file

USAGE = "training"
# the checker queues rule files in module state: one check at a time in this process
_CHECKER_LOCK = threading.Lock()


@dataclass(frozen=True)
class LogCheck:
    """The compliance checker's verdict on one log."""

    valid: bool
    messages: list[str] = field(default_factory=list)  # its errors and warnings, as it words them


@dataclass(frozen=True)
class TrainingFacts:
    """What one training log says."""

    run_start_ms: float | None = None
    run_stop_ms: float | None = None
    status: str = ""  # run_stop's: success, aborted
    epochs: float | None = None  # epoch_num of the last eval_accuracy
    accuracy: float | None = None  # the last eval_accuracy
    seeds: list[int] = field(default_factory=list)
    benchmark: str = ""
    global_batch_size: int | None = None

    @property
    def time_to_train_min(self) -> float | None:
        """result_summarizer's score of this run: (run_stop - run_start) in minutes."""
        if self.run_start_ms is None or self.run_stop_ms is None:
            return None
        return (self.run_stop_ms - self.run_start_ms) / 60_000


def check_log(path: Path, ruleset: str) -> LogCheck:
    """The ruleset's compliance checker on path (a missing file is invalid, with the reason)."""
    if not path.is_file():
        return LogCheck(False, [f"{path.name} was not written"])
    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=False, werror=False)
    with _CHECKER_LOCK:
        try:
            valid = checker.check_file(str(path), f"{USAGE}_{ruleset}/common.yaml")
        except Exception as e:  # its rule code raises anything on an odd log
            return LogCheck(False, [f"the compliance checker stopped: {e}"])
    messages = [*checker.not_overwritable, *checker.overwritable.values(),
                *checker.warnings.values()]
    return LogCheck(bool(valid), [str(m).strip() for m in messages])


def read_facts(path: Path, ruleset: str) -> TrainingFacts:
    """The facts of a log (empty facts for a missing file)."""
    if not path.is_file():
        return TrainingFacts()
    lines, _ = parse_file(str(path), ruleset=ruleset)
    found: dict[str, object] = {"seeds": []}
    for line in lines:
        value, meta = line.value.get("value"), line.value.get("metadata") or {}
        if line.key == "run_start":
            found["run_start_ms"] = float(line.timestamp)
        elif line.key == "run_stop":
            found["run_stop_ms"] = float(line.timestamp)
            found["status"] = str(meta.get("status", ""))
        elif line.key == "eval_accuracy":
            found["accuracy"] = float(value)
            if "epoch_num" in meta:
                found["epochs"] = float(meta["epoch_num"])
        elif line.key == "seed":
            found["seeds"].append(int(value))  # type: ignore[attr-defined]
        elif line.key == "submission_benchmark":
            found["benchmark"] = str(value)
        elif line.key == "global_batch_size":
            found["global_batch_size"] = int(value)
    return TrainingFacts(**found)  # type: ignore[arg-type]
