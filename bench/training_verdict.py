"""The verdict on one training run, the moment its log is collected.

The log must be there, pass the ruleset's compliance checker (mlperf-logging's own), carry the
seed subrun drew for the run, and show convergence: run_stop `success` with the quality metric
at or above the benchmark's target. A run that did not converge is reported at once with the
epochs it ran and the best accuracy it reached; for olympic scoring it counts as infinitely slow.
"""

from __future__ import annotations

from pathlib import Path

from bench.run import OUTPUT_DIR, Check, Mode, RunSpec, Verdict
from bench.training_log import check_log, read_facts


def log_path(folder: Path, spec: RunSpec) -> Path:
    """Where a collected attempt's mllog file is (settings["log_file"] in the output folder)."""
    return folder / OUTPUT_DIR / str(spec.settings.get("log_file", "result.txt"))


def judge_training(spec: RunSpec, folder: Path) -> Verdict:
    """The verdict on the collected attempt in folder (a store attempt folder)."""
    ruleset, target = spec.round, float(spec.settings["quality_target"])
    seed = int(spec.settings["seed"])
    log = log_path(folder, spec)
    compliance = check_log(log, ruleset)
    facts = read_facts(log, ruleset)
    converged = facts.status == "success" and facts.accuracy is not None \
        and facts.accuracy >= target
    epochs = f"{facts.epochs:g}" if facts.epochs is not None else "no"
    reached = f"{facts.accuracy:.5f}" if facts.accuracy is not None else "none"
    checks = [
        Check(name="compliance", ok=compliance.valid,
              detail=f"mlperf-logging {ruleset} compliance checker: "
                     + ("passed" if compliance.valid else "; ".join(compliance.messages[:3]))),
        Check(name="seed", ok=facts.seeds == [seed],
              detail=f"logged seeds {facts.seeds}, drawn {seed}"),
        Check(name="converged", ok=converged,
              detail=f"run_stop {facts.status or 'missing'} after {epochs} epochs, eval_accuracy "
                     f"{reached} against the target {target:g}"),
    ]
    failing = [c for c in checks if not c.ok]
    metrics = {"seed": float(seed)}
    if facts.time_to_train_min is not None:
        metrics["time_to_train_min"] = facts.time_to_train_min
    if facts.epochs is not None:
        metrics["epochs"] = facts.epochs
    if facts.accuracy is not None:
        metrics["eval_accuracy"] = facts.accuracy
    return Verdict(passed=not failing, checks=checks,
                   reason="; ".join(f"{c.name}: {c.detail}" for c in failing),
                   fix=_fix(failing), metrics=metrics,
                   submittable=spec.mode is Mode.SUBMISSION and not failing)


def _fix(failing: list[Check]) -> str:
    names = {c.name for c in failing}
    if "compliance" in names:
        return ("Make the harness log every key the compliance checker names, through mllog "
                "(python -m mlperf_logging.compliance_checker on the log shows the same).")
    if "seed" in names:
        return "Pass the {seed} placeholder to the harness and log it once with mllog's `seed`."
    if "converged" in names:
        return ("A run that does not converge counts as infinitely slow; one per set is dropped "
                "by olympic scoring. More than that: check the hyperparameters.")
    return ""
