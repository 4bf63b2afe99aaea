"""Who holds a slot: a record on the Prefect server per slot, so a waiting run can say whom it
waits for and the plan can count the wait.

A global concurrency limit knows how many of its slots are taken, not by whom. While a flow run
holds a slot (`host:<name>`, `analyzer:<name>`, `campaign:<name>`) it keeps a Prefect Variable
naming itself, its campaign, the run, since when, and how much work its campaign still has on
that host. The record is deleted before the slot is released; a record whose flow run is no
longer running (killed, crashed) is ignored, then removed by whoever reads it.
"""

from __future__ import annotations

import hashlib
import re
from contextlib import suppress
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import VariableCreate, VariableUpdate
from prefect.client.schemas.objects import StateType
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.settings import PREFECT_API_URL

from flows.private_api import is_private

PREFIX = "subrun-slot-"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LIVE = {StateType.RUNNING, StateType.PENDING, StateType.CANCELLING, StateType.PAUSED}


def server_in_use() -> bool:
    """True when runs report to a Prefect server (not a temporary API: Prefect's, or the one
    the command started for itself, flows.private_api)."""
    url = PREFECT_API_URL.value()
    return bool(url) and not is_private(url)


@dataclass(frozen=True)
class Holder:
    """A flow run holding a slot, and the work its campaign has left on the slot's host."""

    flow_run_id: str
    flow_run_name: str
    campaign: str
    run: str  # the run's label; "" when a flow run holds its campaign's slot
    remaining_s: float  # the campaign's work on the host from `since`, this run included
    run_s: float  # this run's own estimate
    since: datetime = EPOCH  # set when the record is written
    slot: str = ""

    def left_s(self, now: datetime | None = None) -> float:
        """The campaign's work left on its host: the runs after this one, and what remains
        of this one's estimate."""
        elapsed = ((now or datetime.now(UTC)) - self.since).total_seconds()
        return max(self.remaining_s - self.run_s, 0.0) + max(self.run_s - elapsed, 0.0)

    def describe(self, now: datetime | None = None) -> str:
        """`host:x is held by flow run 'name' (id) of campaign 'c', run ..., since ...`."""
        run = f", run {self.run}" if self.run else ""
        since = self.since.astimezone().strftime("%H:%M:%S")
        where = "its host" if self.run else "its hosts"
        return (f"{self.slot} is held by flow run '{self.flow_run_name}' ({self.flow_run_id}) "
                f"of campaign '{self.campaign}'{run}, since {since}; that campaign has about "
                f"{self.left_s(now):.0f} s of runs left on {where}")


def variable_name(slot: str) -> str:
    """A Variable name for the slot (lowercase letters, digits, dashes), unique per slot."""
    readable = re.sub(r"[^a-z0-9_-]+", "-", slot.lower()).strip("-")[:80]
    return f"{PREFIX}{readable}-{hashlib.sha256(slot.encode()).hexdigest()[:8]}"


def record(slot: str, holder: Holder) -> Holder:
    """Say on the server that holder holds slot from now on; returns the record written."""
    held = replace(holder, slot=slot, since=datetime.now(UTC))
    value = {**asdict(held), "since": held.since.isoformat()}
    name = variable_name(slot)
    with get_client(sync_client=True) as client:
        try:
            client.create_variable(VariableCreate(name=name, value=value, tags=["subrun"]))
        except ObjectAlreadyExists:  # a record left by a holder that died
            client.update_variable(VariableUpdate(name=name, value=value))
    return held


def release(slot: str, flow_run_id: str) -> None:
    """Delete the slot's record if it is this flow run's (before the slot itself is released)."""
    name = variable_name(slot)
    with get_client(sync_client=True) as client:
        found = client.read_variable_by_name(name)
        holder = _parse(found.value) if found is not None else None
        if holder is not None and holder.flow_run_id == flow_run_id:
            with suppress(ObjectNotFound):
                client.delete_variable_by_name(name)


def current(slot: str) -> Holder | None:
    """Who holds slot now, by its record; a record of a flow run no longer running is removed."""
    with get_client(sync_client=True) as client:
        found = client.read_variable_by_name(variable_name(slot))
        if found is None:
            return None
        return _live(client, found.name, _parse(found.value))


def all_current() -> list[Holder]:
    """Every live slot record on the server (stale ones are removed on the way)."""
    with get_client(sync_client=True) as client:
        found = [v for v in client.read_variables() if v.name.startswith(PREFIX)]
        return [h for h in (_live(client, v.name, _parse(v.value)) for v in found) if h]


def other_campaigns_on(campaign: str, hosts: list[str]) -> dict[str, Holder]:
    """Per host of the list: the flow run of another campaign holding it now (its left-over
    work is a wait this campaign will have). Empty without a server."""
    if not server_in_use():
        return {}
    found = {}
    for holder in all_current():
        host = holder.slot.removeprefix("host:")
        if holder.slot.startswith("host:") and host in hosts and holder.campaign != campaign:
            found[host] = holder
    return found


def _parse(value: Any) -> Holder | None:
    if not isinstance(value, dict):
        return None
    try:
        return Holder(**{**value, "since": datetime.fromisoformat(value["since"])})
    except (TypeError, KeyError, ValueError):
        return None


def _live(client: Any, name: str, holder: Holder | None) -> Holder | None:
    """holder when its flow run still runs; else None, and its record is removed."""
    if holder is not None:
        try:
            run = client.read_flow_run(UUID(holder.flow_run_id))
            if run.state is not None and run.state.type in LIVE:
                return holder
        except (ObjectNotFound, ValueError):
            pass
    with suppress(ObjectNotFound):
        client.delete_variable_by_name(name)
    return None
