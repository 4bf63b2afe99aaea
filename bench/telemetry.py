"""Telemetry beside a run: start the sampler with it, judge its trace with the record.

`begin` is called once a run's container or process is up (a new attempt or a reattached one):
it starts the host's sampler (`bench.sampler`) beside it, unless one still runs. The run's
collection stops the sampler and copies its trace among the attempt's files
(`bench.target.collect`). `judge` reads the stored trace (`bench.trace`), records its summary and
flags in `run.json` (`telemetry`) and logs a warning for a throttled or contended run: a
warning the report shows, never a failure. Telemetry never fails a run: a sampler that cannot
start or a trace that cannot be read is logged and the run goes on without it.
"""

from __future__ import annotations

import logging

from bench import sampler
from bench.run import RunRecord
from bench.store import RunStore
from bench.target import RunHandle, RunTarget
from bench.trace import read_trace
from bench.trace_judge import summarize
from lab.cores import core_list, run_cores
from lab.errors import SubrunError
from lab.host import Detached

log = logging.getLogger("subrun.runs")


def begin(target: RunTarget, handle: RunHandle) -> None:
    """Sample the host while the run's process lives (best effort)."""
    try:
        own = ""  # a container's process is pinned itself: the sampler reads its cores
        if isinstance(handle.process, Detached):  # a native process: its session is the run
            pid, mode = handle.process.pid, "session"
            own = core_list(run_cores(target.host, target.config))  # its supervisor is not
        else:
            result = target.engine.docker(["inspect", "--format", "{{.State.Pid}}",
                                           handle.process.id], what="reading a run's pid")
            pid, mode = int(result.stdout.strip() or 0), "cgroup"
        if pid > 0:  # 0: the container has already ended, nothing left to sample
            sampler.ensure(target.host, handle.attempt_name, pid, mode, own)
    except (SubrunError, ValueError) as e:
        log.warning("%s: telemetry is not sampled on host '%s': %s", handle.name,
                    target.config.name, e)


def judge(store: RunStore, record: RunRecord) -> RunRecord:
    """Record the summary and flags of the attempt's stored trace (once), warn when flagged."""
    if record.telemetry is not None or sampler.TRACE not in record.files:
        return record
    path = store.path(record.key, record.attempt) / sampler.TRACE
    try:
        summary = summarize(read_trace(path))
    except OSError as e:
        log.warning("%s: its telemetry trace cannot be read: %s", record.spec.label, e)
        return record
    for reason in summary.reasons:
        log.warning("%s: attempt %d %s", record.spec.label, record.attempt, reason)
    return store.update(record.key, record.attempt, telemetry=summary)
