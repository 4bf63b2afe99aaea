"""A campaign's power run: ranging then testing LoadGen runs in the benchmark's container,
bracketed by the analyzer, stored and judged like every other run.

A power run cannot be reattached (the analyzer session belongs to the process that opened it),
so an attempt found still marked running is recorded lost and run again.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench import target as remote
from bench.execute import run_files
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import RunRecord, Verdict
from bench.store import RunStore
from bench.target import RunTarget
from bench.verdict import judge_dir
from lab.config import Inventory
from lab.errors import PowerError, RunError
from power.measure import PowerRequest, measure_power
from power.phase import WorkloadCall
from power.session import PowerResult


def execute_power(target: RunTarget, planned: PlannedRun, store: RunStore, rules: RoundRules,
                  inventory: Inventory, analyzer: str, *, short_ranging: bool = False,
                  settle_s: float = 10.0, lock_timeout_s: float = 0.0) -> RunRecord:
    """Bring a power run to a judged record (reusing a finished one); wait up to
    lock_timeout_s for an analyzer another run holds."""
    spec = planned.spec
    latest = store.latest(spec.key)
    if latest is not None and latest.state == "running":
        latest = store.update(latest.key, latest.attempt, state="lost",
                              finished_at=datetime.now(UTC),
                              error="The power run was interrupted; an analyzer session cannot "
                                    "be resumed, so it runs again.")
    if latest is not None and latest.state == "finished":
        return latest
    record = store.start_attempt(spec)
    timeout_s = max(300.0, planned.estimate_s * 5)
    files = run_files(spec, rules)

    def workload(call: WorkloadCall) -> None:
        status = remote.run_to_completion(target, record, call.phase, files, call.out_dir,
                                          timeout_s)
        if status.running or status.exit_status != 0:
            raise RunError(f"The {call.phase} pass of {spec.label} on host "
                           f"'{target.config.name}' failed (exit status {status.exit_status}).")

    with tempfile.TemporaryDirectory(prefix="subrun-power-") as tmp:
        out = Path(tmp) / "power-run"
        request = PowerRequest(analyzer=analyzer, label=f"{spec.key}-a{record.attempt}",
                               out_dir=out, short_ranging=short_ranging, settle_s=settle_s,
                               lock_timeout_s=lock_timeout_s)
        try:
            result = measure_power(request, workload, sut=target.host, inventory=inventory)
        except (PowerError, RunError) as e:
            if out.is_dir():
                store.add_files(record.key, record.attempt, out)  # keep every sample logged
            return store.update(record.key, record.attempt, state="failed", error=str(e),
                                finished_at=datetime.now(UTC))
        store.add_files(record.key, record.attempt, out)
    folder = store.path(record.key, record.attempt)
    verdict = _with_power(judge_dir(spec, folder / "run_1", rules), result)
    return store.update(record.key, record.attempt, state="finished",
                        finished_at=datetime.now(UTC), exit_status=0, verdict=verdict)


def _with_power(verdict: Verdict, result: PowerResult) -> Verdict:
    metrics = {**verdict.metrics, "power_w": result.avg_power_w}
    if result.energy_per_query_mj is not None:
        metrics["energy_per_query_mj"] = result.energy_per_query_mj
    if result.ranging_avg_power_w is not None:
        metrics["ranging_power_w"] = result.ranging_avg_power_w
    return verdict.model_copy(update={"metrics": metrics, "submittable": False})
