"""Settings for an automatic re-run of an INVALID run, computed from what it measured.

Offline ends too soon when target_qps is below what the SUT does (LoadGen generates
target_qps x min_duration samples), so the next target is the measured rate plus headroom. Server
misses its latency bound when the load is above what the SUT serves, so the next target backs off
below the measured rate. SingleStream/MultiStream run out of queries when the expected latency is
too high, so the next expected latency is the measured one minus headroom. The campaign re-runs up
to a bound of its own.
"""

from __future__ import annotations

from bench.loadgen_log import DetailLog
from bench.run import RunSpec, Scenario, Setting

RERUN_UP = 1.1  # Offline: a query big enough to outlast min_duration at the measured speed
RERUN_DOWN = 0.9  # Server: back off below the load the SUT could not serve in time


def rerun_settings(spec: RunSpec, log: DetailLog) -> tuple[dict[str, Setting] | None, str]:
    """Settings for a re-run of an INVALID run, derived from what it measured, and the fix."""
    key = f"*.{spec.scenario.loadgen}.target_qps"
    current = positive(spec.settings.get(key, log.effective.get("target_qps")))
    if spec.scenario is Scenario.OFFLINE:
        measured = positive(log.get("result_samples_per_second"))
        if log.get("result_min_duration_met") is not False or measured is None:
            return None, "Look at the run's summary for why LoadGen judged it INVALID."
        new = measured * RERUN_UP
        why = f"The SUT ran {measured:g} samples/s, so target_qps {current} made too short a run"
    elif spec.scenario in (Scenario.SERVER, Scenario.INTERACTIVE):
        measured = positive(log.get("result_completed_samples_per_sec"))
        known = [x for x in (current, measured) if x is not None]
        if not known:
            return None, "Lower target_qps and re-run."
        new = min(known) * RERUN_DOWN
        why = f"The SUT completed {measured} samples/s at target_qps {current}"
    elif log.get("result_min_duration_met") is False or log.get("result_min_queries_met") is False:
        return _rerun_latency(spec, log)
    else:
        return None, ("Early stopping needs more queries: run longer (in short mode raise "
                      "min_duration or min_query_count).")
    if current is not None and abs(new - current) < 0.01 * current:
        return None, f"{why}; set target_qps by hand and re-run."
    new = round(new, 3)
    return {**spec.settings, key: new}, f"{why}: re-run with target_qps {new}."


def _rerun_latency(spec: RunSpec, log: DetailLog) -> tuple[dict[str, Setting] | None, str]:
    """SingleStream/MultiStream that ran out of queries: expect the latency it measured."""
    key = f"*.{spec.scenario.loadgen}.target_latency"
    measured_ns = positive(log.get("result_mean_latency_ns"))
    if measured_ns is None:
        return None, "Lower target_latency (the expected latency) and re-run."
    new = round(measured_ns / 1e6 * RERUN_DOWN, 4)
    return ({**spec.settings, key: new},
            f"The SUT answered in {measured_ns / 1e6:.4g} ms on average, faster than the expected "
            f"latency, so LoadGen ran out of queries: re-run with target_latency {new} ms.")


def positive(value: object) -> float | None:
    """value as a float if it is a positive number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None
