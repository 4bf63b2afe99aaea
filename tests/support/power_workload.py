"""A power session's workload for tests: each call is one real LoadGen run of the tiny SUT."""

from __future__ import annotations

import threading

from power.phase import Workload, WorkloadCall
from testkit.loadgen_run import TinySut, run_loadgen


def loadgen_workload(scenario: str, duration_ms: int = 2000,
                     during: dict[str, threading.Timer] | None = None) -> Workload:
    """A workload running LoadGen for about duration_ms per phase; `during` maps a phase to a
    timer started as its LoadGen run begins (fault injection), joined when it ends."""
    conf = (f"*.{scenario}.min_duration = {duration_ms}\n*.{scenario}.min_query_count = 1\n"
            "*.Offline.target_qps = 500\n*.SingleStream.target_latency = 2\n")

    def run(call: WorkloadCall) -> None:
        timer = (during or {}).get(call.phase)
        if timer is not None:
            timer.start()
        run_loadgen(call.out_dir, scenario=scenario, user_conf=conf,
                    sut=TinySut(sample_time_us=2000))
        if timer is not None:
            timer.join()

    return run
