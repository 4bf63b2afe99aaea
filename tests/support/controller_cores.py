"""Keep the test controller off a lab host's pinned cores while a timing test runs.

`subrun run` moves itself (and the Prefect API it starts) off the cores a local host pins its
runs to (`lab.cores.keep_off`). The lab's hosts are other machines only in name: pytest, the
Prefect API it started and the lab's hosts share this machine's cores. A test that compares
timings moves the controller side (this process, every thread, and the processes it started)
off the pinned host's cores for its duration, as a controller on its own machine would be.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import psutil

from lab.config import Inventory
from lab.cores import resolve, setting_of


def _threads(process: psutil.Process) -> list[int]:
    with contextlib.suppress(psutil.Error):
        return [t.id for t in process.threads()]
    return []


@contextlib.contextmanager
def controller_off(inventory: Inventory, host: str) -> Iterator[tuple[int, ...]]:
    """While inside: the controller's processes run off host's pinned cores (yields them)."""
    setting, field = setting_of(inventory.host(host))
    avoid = set(resolve(setting, os.cpu_count() or 1, host=host, field=field))
    me = psutil.Process()
    processes = [me, *me.children(recursive=True)]
    before: dict[int, set[int]] = {}
    for process in processes:
        for tid in _threads(process):
            with contextlib.suppress(OSError):
                allowed = os.sched_getaffinity(tid)
                if allowed - avoid and allowed & avoid:
                    before[tid] = allowed
                    os.sched_setaffinity(tid, allowed - avoid)
    try:
        yield tuple(sorted(avoid))
    finally:
        for tid, allowed in before.items():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(tid, allowed)
        if (original := before.get(me.pid)) is not None:
            for tid in _threads(me):  # threads started inside inherited the narrower set
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, original)
