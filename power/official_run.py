"""A campaign's official power run: the director's power-dev server around one ordinary run.

For the length of the run the analyzer is locked and power-dev's server serves on the director
(started over SSH, or found still serving when a restarted controller reattaches to a run whose
client talks to it); the run itself is `bench.execute.execute` with `power.wrap.OfficialWrap`,
so it is detached, reattached, collected, judged and re-run like any other. The server is
stopped when the run has its final record.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from bench.execute import ExecuteOptions, execute
from bench.plan import PlannedRun
from bench.rules import RoundRules
from bench.run import RunRecord
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunTarget
from lab.config import Inventory
from lab.errors import PowerError, SubrunError, is_link_fault
from lab.host import Host
from lab.transport import open_host
from power.client import Identity
from power.director import director_address, server_plan
from power.lock import analyzer_lock
from power.measure import find_analyzer
from power.powerdev import (
    PowerServer,
    ServerPlan,
    conf_path,
    logged_identity,
    server_conf,
    server_name,
    start_power_server,
    stop_power_server,
    verify_checkout,
)
from power.preflight import PreflightReport, check_clocks, check_identity
from power.wrap import OfficialWrap

LOCK_WAIT_S = 6 * 3600.0  # another host's power run holds the analyzer: waiting is normal


@dataclasses.dataclass(frozen=True)
class OfficialSetup:
    """Where the campaign's power-dev checkout is, and how long to wait for the analyzer."""

    checkout: Path  # the same path on the controller and on every host that runs power
    lock_dir: Path | None = None
    lock_wait_s: float = LOCK_WAIT_S


def execute_official(target: RunTarget, planned: PlannedRun, store: RunStore,
                     rules: RoundRules, inventory: Inventory, analyzer: str,
                     setup: OfficialSetup, options: ExecuteOptions | None = None) -> RunRecord:
    """Bring an official power run to its final record; a director that cannot serve fails
    the attempt with the reason before anything runs."""
    spec = planned.spec
    latest = store.latest(spec.key)
    if passed(latest):
        return latest  # nothing to measure: no server needed
    label = f"subrun-{spec.key[:16]}"
    director = inventory.director
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(director_session(
                inventory, analyzer, label, sut=target.host, setup=setup))
        except PowerError as e:
            record = store.start_attempt(spec)
            return store.update(record.key, record.attempt, state="failed", error=str(e),
                                finished_at=datetime.now(UTC))
        assert director is not None and director.ntp_server is not None
        wrap = OfficialWrap(target_checkout=str(setup.checkout),
                            controller_checkout=setup.checkout,
                            director_address=director_address(inventory),
                            director_port=server.plan.port, ntp_server=director.ntp_server,
                            label=label)
        return execute(dataclasses.replace(target, wrap=wrap), planned, store, rules,
                       options=options)
    raise AssertionError("unreachable")  # the ExitStack does not swallow exceptions


@contextlib.contextmanager
def director_session(inventory: Inventory, analyzer: str, label: str, *, sut: Host,
                     setup: OfficialSetup) -> Iterator[PowerServer]:
    """The analyzer's lock and power-dev's server, health-checked, for one run."""
    config = find_analyzer(inventory, analyzer)
    plan = server_plan(inventory, config)
    assert inventory.director is not None
    director = open_host(inventory.host(inventory.director.host))
    try:
        with analyzer_lock(config.name, label, lock_dir=setup.lock_dir,
                           timeout_s=setup.lock_wait_s):
            server = _serving(director, plan) or start_power_server(director, plan)
            keep = False
            try:
                report = PreflightReport()
                report.add("PTDaemon answering", True, f"power-dev's server on "
                           f"'{director.name}' reached PTDaemon on port {plan.network_port}")
                check_identity(report, Identity.parse(server.identity), config.model)
                check_clocks(report, sut, director, "director")
                report.raise_for_failure(label)
                yield server
            except SubrunError as e:
                keep = is_link_fault(e)  # the run goes on in its container; a retry reattaches
                raise
            finally:
                if not keep:
                    stop_power_server(server)
    finally:
        director.close()


def _serving(director: Host, plan: ServerPlan) -> PowerServer | None:
    """A server left serving by an earlier controller (its run's client may still talk to it)."""
    handle = director.find_detached(server_name(plan.analyzer))
    if handle is None or not director.poll_detached(handle).running:
        return None
    written = director.run(["cat", conf_path(director, plan)], check=False, timeout_s=30)
    if written.stdout != server_conf(plan):  # stale, with other settings: not ours to reuse
        stop_power_server(PowerServer(director, handle, plan, {}, ""))
        return None
    sources = verify_checkout(director, plan.checkout, plan.python)
    return PowerServer(director, handle, plan, sources,
                       logged_identity(director, handle))
