"""Hosts, analyzers and campaigns as slots held by the Prefect server, across campaigns and
workers.

A SUT measures one run at a time, whichever campaign or worker asks; a lock on one controller
cannot see a second controller or worker. With a Prefect server in use, each host and each
analyzer is a global concurrency limit (`host:<name>`, `analyzer:<name>`, limit 1, created on
first use and visible in the UI), held around every run that uses it; each campaign is one too
(`campaign:<name>`), held by its flow run, so two flow runs of one campaign (one run store)
take turns while campaigns on other hosts go on. A holder says who it is (`flows.holders`), so a
run that waits says whom for. The slots are for visibility and queueing; what keeps two
controllers off one host, with or without a server, is the lease on the host itself
(`lab.lease`), taken after the slots by every run in every mode.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.client.schemas.objects import ConcurrencyLeaseHolder
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound, PrefectHTTPStatusError

from flows import holders
from flows.holders import Holder, server_in_use
from lab.errors import RunCancelled, SubrunError
from lab.host import Host
from lab.lease import LeaseHolder, leased

LEASE_S = 300.0  # renewed while the run goes on; lets a slot go when its holder died
POLL_S = 2.0  # while waiting: how often to ask for the slot again, and to look for a cancel
LOCKED = 423  # the server's answer while a limit has no free slot
log = logging.getLogger("subrun.slots")


def slot_names(host: str, analyzer: str | None) -> list[str]:
    """The slots a run holds: its host, and for a power run its analyzer."""
    return [f"host:{host}"] + ([f"analyzer:{analyzer}"] if analyzer else [])


def campaign_slot(campaign: str) -> str:
    """The slot a flow run holds for its whole campaign."""
    return f"campaign:{campaign}"


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


def waiting_for(busy: list[str]) -> tuple[str, tuple[object, ...]]:
    """What a run waits for, in words, and who the holders are (to tell only a change)."""
    parts, who = [], []
    for name in busy:
        holder = holders.current(name)
        parts.append(holder.describe() if holder else f"{name} is held by another run")
        who.append((name, holder.flow_run_id, holder.run) if holder else (name,))
    return "waiting: " + "; ".join(parts), tuple(who)


@contextmanager
def held(names: list[str], holder: Holder, on_wait: Callable[[str], None],
         cancelled: threading.Event | None = None,
         leases: Sequence[tuple[Host, str]] = ()) -> Iterator[None]:
    """Hold every slot in names for the block when a server is in use, then every lease on
    its target (`lab.lease`: a host, an analyzer's host), with or without a server; wait as
    long as it takes. on_wait hears whom the run waits for, again whenever the holder
    changes; a cancel while waiting raises RunCancelled."""
    with ExitStack() as stack:
        if names and server_in_use():
            stack.enter_context(_slots(names, holder, on_wait, cancelled))
        me = LeaseHolder.here(holder.campaign, holder.run)
        for host, name in leases:
            stack.enter_context(leased(host, name, me, on_wait, cancelled))
        yield


@contextmanager
def _slots(names: list[str], holder: Holder, on_wait: Callable[[str], None],
           cancelled: threading.Event | None) -> Iterator[None]:
    lease = _acquire(names, holder, on_wait, cancelled)
    try:
        with _renewed(lease):
            recorded = [n for n in names if _record(n, holder)]
            try:
                yield
            finally:  # the record goes before the slot, so nobody is named who let it go
                for name in recorded:
                    _release(name, holder)
    finally:
        _let_go(lease)


def _acquire(names: list[str], holder: Holder, on_wait: Callable[[str], None],
             cancelled: threading.Event | None) -> UUID:
    """Take one slot of each name, together (so two runs never hold one each and wait on the
    other), asking again every POLL_S; a quiet poll rather than Prefect's own acquisition,
    which logs an error for every wait that outlasts its timeout."""
    told: tuple[object, ...] | None = None
    ensure_limits(names)
    lease_holder = ConcurrencyLeaseHolder(type="flow_run", id=UUID(holder.flow_run_id)) \
        if holder.flow_run_id else None
    while True:
        if cancelled is not None and cancelled.is_set():
            raise RunCancelled(f"{holder.run or holder.campaign}: cancelled while waiting for "
                               f"{', '.join(names)}; it runs when the campaign starts again.")
        lease = _take(names, lease_holder)
        if lease is not None:
            return lease
        busy = ensure_limits(names)
        if busy:
            message, who = waiting_for(busy)
            if who != told and (told is None or _all_named(who)):
                on_wait(message)
                told = who
        (cancelled or threading.Event()).wait(POLL_S)


def _all_named(who: tuple[object, ...]) -> bool:
    """Whether every busy slot has a recorded holder. A slot between its holder's record and
    its lease (just taken, or being let go) has none for a moment; that is not news once a
    holder was named."""
    return all(len(w) > 1 for w in who)  # type: ignore[arg-type]


def _take(names: list[str], lease_holder: ConcurrencyLeaseHolder | None) -> UUID | None:
    """The lease on one slot of each name, or None when one of them is full."""
    with get_client(sync_client=True) as client:
        try:
            reply = client.increment_concurrency_slots_with_lease(
                names=names, slots=1, mode="concurrency", lease_duration=LEASE_S,
                holder=lease_holder)
        except PrefectHTTPStatusError as e:
            if e.response.status_code == LOCKED:
                return None
            raise
    found = reply.json()
    if len(found.get("limits") or []) != len(names):
        raise SubrunError(f"The Prefect server has no concurrency limit for some of "
                          f"{', '.join(names)} (deleted while a run wanted it?); run the "
                          "campaign again and they are created anew.")
    return UUID(found["lease_id"])


@contextmanager
def _renewed(lease: UUID) -> Iterator[None]:
    """Renew the lease while the block runs; a renewal that fails (a busy server) is tried
    again, and never stops a run measuring on a host."""
    stop = threading.Event()

    def renew() -> None:
        with get_client(sync_client=True) as client:
            while not stop.wait(LEASE_S / 4):
                try:
                    client.renew_concurrency_lease(lease_id=lease, lease_duration=LEASE_S)
                except Exception as e:  # tried again before the lease runs out
                    log.warning("could not renew the slots' lease %s: %s", lease, e)

    thread = threading.Thread(target=renew, name="subrun-slot-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def _let_go(lease: UUID) -> None:
    try:
        with get_client(sync_client=True) as client:
            client.release_concurrency_slots_with_lease(lease)
    except Exception as e:  # the lease runs out by itself within LEASE_S
        log.warning("could not release the slots' lease %s: %s", lease, e)


def _record(name: str, holder: Holder) -> bool:
    """Say who holds the slot; a server that cannot take the record does not stop the run."""
    try:
        holders.record(name, holder)
        return True
    except Exception as e:  # the record only explains a wait; the slot holds
        log.warning("could not record the holder of %s: %s", name, e)
        return False


def _release(name: str, holder: Holder) -> None:
    try:
        holders.release(name, holder.flow_run_id)
    except Exception as e:  # a record left behind is dropped once this run ends
        log.warning("could not remove the holder record of %s: %s", name, e)
