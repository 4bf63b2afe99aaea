"""A power run on subrun's own path, as the campaign flow calls it: lock, pre-flight, session.

    with open_host(sut_config) as sut:
        result = measure_power(PowerRequest(...), workload, sut=sut, inventory=inventory)

`measure_power` holds the analyzer's lock for the whole run, makes sure subrun's daemon is up on
the analyzer's host (starting or restarting it), checks the daemon answers with the analyzer
hosts.yaml names and that the SUT's clock agrees with the daemon host's, then runs ranging and
testing (`power.session.run_power`). The results are for tracking and never submittable.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lab.config import AnalyzerConfig, Inventory
from lab.errors import PowerError
from lab.host import Host
from lab.transport import open_host
from power.lock import analyzer_lock
from power.phase import Workload
from power.preflight import CLOCK_LIMIT_S, PreflightReport, check_clocks, check_identity
from power.service import DaemonEndpoint, daemon_address, ensure_daemon
from power.session import Label, PowerResult, PowerSettings, run_power


class PowerRequest(BaseModel):
    """One power run the campaign asks for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    analyzer: str  # name in hosts.yaml `analyzers:`
    label: Label  # the run's label (letters, digits, - and _)
    out_dir: Path  # the run's performance directory in the run store
    short_ranging: bool = False
    settle_s: float = Field(default=10.0, ge=0)
    interval_ms: int = Field(default=1000, ge=100, le=60000)
    lock_timeout_s: float = Field(default=0.0, ge=0)
    lock_dir: Path | None = None
    clock_limit_s: float = Field(default=CLOCK_LIMIT_S, gt=0)


def measure_power(request: PowerRequest, workload: Workload, *, sut: Host,
                  inventory: Inventory) -> PowerResult:
    """Lock the analyzer, pre-flight, then ranging + testing; raises PowerError on failure."""
    analyzer = find_analyzer(inventory, request.analyzer)
    host_config = inventory.host(analyzer.host)
    daemon_host = sut if sut.name == host_config.name else open_host(host_config)
    try:
        with analyzer_lock(analyzer.name, request.label, lock_dir=request.lock_dir,
                           timeout_s=request.lock_timeout_s):
            endpoint, report = prepare(request, sut=sut, daemon_host=daemon_host,
                                       inventory=inventory)
            report.raise_for_failure(request.label)
            assert endpoint is not None
            settings = PowerSettings(
                analyzer=analyzer.name, address=endpoint.address, port=endpoint.port,
                label=request.label, out_dir=request.out_dir, settle_s=request.settle_s,
                interval_ms=request.interval_ms, short_ranging=request.short_ranging,
                token=endpoint.token)
            return run_power(settings, workload, console=endpoint.copy_console,
                             sample_log=endpoint.samples)
    finally:
        if daemon_host is not sut:
            daemon_host.close()


def prepare(request: PowerRequest, *, sut: Host, daemon_host: Host,
            inventory: Inventory) -> tuple[DaemonEndpoint | None, PreflightReport]:
    """Start or reuse the daemon and run the pre-flight checks (records, never raises)."""
    analyzer = find_analyzer(inventory, request.analyzer)
    host_config = inventory.host(analyzer.host)
    report = PreflightReport()
    endpoint = None
    try:
        address = daemon_address(analyzer, host_config)
        endpoint = ensure_daemon(daemon_host, analyzer, address=address)
        report.add("daemon host reachable", True, f"'{daemon_host.name}'")
        report.add("daemon answering", True, f"{endpoint.address}:{endpoint.port}")
        check_identity(report, endpoint.identity, analyzer.model)
        check_clocks(report, sut, daemon_host, "daemon host", request.clock_limit_s)
    except PowerError as e:
        report.add("daemon answering", False, str(e))
    return endpoint, report


def find_analyzer(inventory: Inventory, name: str) -> AnalyzerConfig:
    """The analyzer called name in the inventory, or a PowerError listing the known ones."""
    for analyzer in inventory.analyzers:
        if analyzer.name == name:
            return analyzer
    known = ", ".join(a.name for a in inventory.analyzers) or "none"
    raise PowerError(f"No analyzer named '{name}' in hosts.yaml (known: {known}); add it under "
                     "`analyzers:`.")
