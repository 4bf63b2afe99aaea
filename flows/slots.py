"""Hosts and analyzers as slots held by the Prefect server, across campaigns and workers.

A SUT measures one run at a time, whichever campaign or worker asks; a lock on one controller
cannot see a second controller or worker. With a Prefect server in use, each host and each
analyzer is a global concurrency limit (`host:<name>`, `analyzer:<name>`, limit 1, created on
first use and visible in the UI), held around every run that uses it. On the ephemeral API
(`subrun run` without PREFECT_API_URL) there is no server to hold a slot beyond the process,
so the controller's own locks (the analyzer's flock) stay the only guard there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.settings import PREFECT_API_URL

LEASE_S = 300.0  # renewed while the run goes on; lets a slot go when its holder died


def server_in_use() -> bool:
    """True when runs report to a Prefect server (not the ephemeral in-process API)."""
    return bool(PREFECT_API_URL.value())


def slot_names(host: str, analyzer: str | None) -> list[str]:
    """The slots a run holds: its host, and for a power run its analyzer."""
    return [f"host:{host}"] + ([f"analyzer:{analyzer}"] if analyzer else [])


def ensure_limits(names: list[str]) -> list[str]:
    """Create each limit with one slot unless it exists (a user may have raised it); return
    the names whose slots are all taken right now (the run will wait for them)."""
    busy = []
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                found = client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                with suppress(ObjectAlreadyExists):  # another campaign created it just now
                    client.create_global_concurrency_limit(
                        GlobalConcurrencyLimitCreate(name=name, limit=1))
                continue
            if found.active_slots >= found.limit:
                busy.append(name)
    return busy


@contextmanager
def held(names: list[str], on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold every slot in names for the block (waiting as long as it takes), when a server
    is in use; without one, do nothing. on_wait hears what the run waits for."""
    if not server_in_use():
        yield
        return
    busy = ensure_limits(names)
    if busy:
        on_wait(f"waiting for {', '.join(busy)}, in use by another run")
    # one slot of each, taken together, so two runs never hold one each and wait on the other
    # a lease renewal that fails once (a busy server) must not kill a run measuring on a host
    with concurrency(names, occupy=1, strict=True, lease_duration=LEASE_S,
                     raise_on_lease_renewal_failure=False):
        yield
