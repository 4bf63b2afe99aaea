"""Stopping a campaign's runs in flight when the campaign is cancelled.

Cancelling a flow run ends the controller's process, but a run executes detached on its target
and would go on. What is left is found from the run store (attempts still marked running) and
by name on the target (a run's name carries its campaign): each is stopped at once (TERM, KILL
after 2 s: a harness that is PID 1 in its container ignores TERM, and `docker stop`'s default
10 s would hold the host), its files collected into the store, and the attempt recorded
`cancelled`: neither passed nor failed, and run again when the campaign starts again, while
every finished run is kept.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from bench import target as remote
from bench.run import RunKind, RunRecord, RunState
from bench.store import RunStore
from bench.target import RunHandle, RunTarget
from lab.errors import SubrunError

POWER_PHASES = ("ranging", "testing")  # a power run's passes run under phased names
STOP_GRACE_S = 2.0  # TERM, then KILL: a cancelled run is stopped within seconds, not 10


def cancel_running(targets: Mapping[str, RunTarget], store: RunStore) -> list[RunRecord]:
    """Stop every attempt of the store still running on its target; record each `cancelled`.
    All at once: one host's collection must not keep another host's run going."""
    found = [(targets[r.spec.host], r) for r in store.runs()
             if r.state == RunState.RUNNING and r.spec.host in targets]
    if not found:
        return []
    with ThreadPoolExecutor(max_workers=len(found), thread_name_prefix="subrun-cancel") as pool:
        return list(pool.map(lambda pair: _cancel(pair[0], pair[1], store), found))


def _handles(target: RunTarget, record: RunRecord) -> list[RunHandle]:
    phases = ("", *POWER_PHASES) if record.spec.kind is RunKind.POWER else ("",)
    return [h for h in (remote.find(target, record, p) for p in phases) if h is not None]


def _cancel(target: RunTarget, record: RunRecord, store: RunStore) -> RunRecord:
    tails = []
    for handle in _handles(target, record):
        try:
            remote.stop(target, handle, STOP_GRACE_S)
            with tempfile.TemporaryDirectory(prefix="subrun-cancel-") as tmp:
                tails.append(remote.collect(target, handle, Path(tmp)))
                store.add_files(record.key, record.attempt, Path(tmp))
        except SubrunError as e:  # keep stopping the others; say what could not be kept
            tails.append(f"(not collected: {e})")
        finally:
            remote.discard(target, handle)
    return store.update(record.key, record.attempt, state=RunState.CANCELLED,
                        finished_at=datetime.now(UTC), log_tail="\n".join(tails)[-64 * 1024:],
                        error="Cancelled with its campaign's flow run; it runs again when the "
                              "campaign starts again.")
