"""A submittable power run, as the campaign flow calls it: lock, pre-flight, server, client.

    with open_host(sut_config) as sut:
        result = measure_official(OfficialPowerRequest(...), workload, sut=sut,
                                  inventory=inventory)

The director (hosts.yaml `director:`) holds the power-dev checkout and SPEC PTDaemon. Pre-flight
checks that the director answers, that both power-dev checkouts are the official sources, that
power-dev's server starts and reaches PTDaemon, that the analyzer PTDaemon identifies is the
one hosts.yaml names, and that the SUT's clock agrees with the director's; then power-dev's
client runs ranging and testing and the server is stopped again.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from lab.config import AnalyzerConfig, Inventory
from lab.errors import PowerError
from lab.host import Host
from lab.local import LocalHost
from lab.transport import open_host
from power.client import Identity
from power.lock import analyzer_lock
from power.measure import find_analyzer
from power.official import OfficialRequest, OfficialResult, run_official
from power.phase import Workload
from power.powerdev import (
    PowerServer,
    ServerPlan,
    start_power_server,
    stop_power_server,
    verify_checkout,
)
from power.preflight import (
    CLOCK_LIMIT_S,
    PreflightReport,
    check_clocks,
    check_identity,
    check_reachable,
)
from power.service import device_type
from power.session import Label


class OfficialPowerRequest(BaseModel):
    """One submittable power run the campaign asks for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    analyzer: str
    label: Label
    out_dir: Path
    client_checkout: Path  # power-dev checkout on the controller (client side)
    python: str = sys.executable  # runs power-dev's client and the workload relay
    short_ranging: bool = False  # makes the result unsubmittable
    lock_timeout_s: float = Field(default=0.0, ge=0)
    lock_dir: Path | None = None
    clock_limit_s: float = Field(default=CLOCK_LIMIT_S, gt=0)
    allowed_sources: list[dict[str, str]] | None = None  # the round's sources_checksums.json


def server_plan(inventory: Inventory, analyzer: AnalyzerConfig) -> ServerPlan:
    """The power-dev server settings for analyzer, from hosts.yaml's `director:`."""
    director = inventory.director
    if director is None:
        raise PowerError("hosts.yaml has no `director:`; a submittable power run needs the "
                         "director host with power-dev and SPEC PTDaemon.")
    missing = [k for k in ("power_dev", "ptd", "ntp_server") if not getattr(director, k)]
    if missing:
        raise PowerError(f"hosts.yaml `director:` lacks {', '.join(missing)}: set the power-dev "
                         "checkout, the SPEC PTDaemon binary and the NTP server it uses.")
    assert director.power_dev and director.ptd and director.ntp_server
    return ServerPlan(
        analyzer=analyzer.name, checkout=director.power_dev, python=director.python,
        ptd=director.ptd, listen_address=director_address(inventory), port=director.port,
        ntp_server=director.ntp_server, device_type=device_type(analyzer),
        device_port=analyzer.device_port or analyzer.resource, network_port=analyzer.port,
        interface_flag=analyzer.interface_flag)


def director_address(inventory: Inventory) -> str:
    """Where the power client reaches the director's server."""
    assert inventory.director is not None
    host = inventory.host(inventory.director.host)
    return inventory.director.address or host.address or "127.0.0.1"


def prepare_director(request: OfficialPowerRequest, *, sut: Host, director: Host,
                     inventory: Inventory) -> tuple[PowerServer | None, PreflightReport]:
    """Start power-dev's server and run the pre-flight checks (records, never raises)."""
    analyzer = find_analyzer(inventory, request.analyzer)
    report = PreflightReport()
    if not check_reachable(report, director, "director"):
        return None, report
    try:
        plan = server_plan(inventory, analyzer)
    except PowerError as e:
        report.add("director configured", False, str(e))
        return None, report
    client_side = LocalHost("controller", str(request.out_dir.parent))
    if not report.attempt("client checkout official", lambda: _verified(
            client_side, str(request.client_checkout), request.python, request)):
        return None, report
    server = None
    try:
        server = start_power_server(director, plan, request.allowed_sources)
        report.add("PTDaemon answering", True, f"power-dev's server on '{director.name}' "
                   f"reached PTDaemon on port {plan.network_port}")
        check_identity(report, Identity.parse(server.identity), analyzer.model)
    except PowerError as e:
        report.add("PTDaemon answering", False, str(e))
    check_clocks(report, sut, director, "director", request.clock_limit_s)
    return server, report


def measure_official(request: OfficialPowerRequest, workload: Workload, *, sut: Host,
                     inventory: Inventory) -> OfficialResult:
    """Lock, pre-flight, power-dev client run, server stop; raises PowerError on failure."""
    analyzer = find_analyzer(inventory, request.analyzer)
    plan_director = inventory.director
    if plan_director is None:
        raise PowerError("hosts.yaml has no `director:`; see server_plan.")
    director = open_host(inventory.host(plan_director.host))
    try:
        with analyzer_lock(analyzer.name, request.label, lock_dir=request.lock_dir,
                           timeout_s=request.lock_timeout_s):
            server, report = prepare_director(request, sut=sut, director=director,
                                              inventory=inventory)
            try:
                report.raise_for_failure(request.label)
                assert plan_director.ntp_server is not None
                return run_official(OfficialRequest(
                    label=request.label, out_dir=request.out_dir,
                    director_address=director_address(inventory),
                    director_port=plan_director.port, ntp_server=plan_director.ntp_server,
                    client_checkout=request.client_checkout, python=request.python,
                    short_ranging=request.short_ranging,
                    allowed_sources=request.allowed_sources), workload)
            finally:
                if server is not None:
                    stop_power_server(server)
    finally:
        director.close()


def _verified(host: Host, checkout: str, python: str, request: OfficialPowerRequest) -> str:
    verify_checkout(host, checkout, python, request.allowed_sources)
    return f"{checkout} matches the official sources"
