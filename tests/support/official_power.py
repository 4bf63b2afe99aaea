"""The official power path on loopback, as two test modules run it: power-dev's server and
client (a checkout) driving subrun's daemon behind a PTD-compatible launcher, with a test NTP
responder, and a real LoadGen Offline workload."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from lab.config import AnalyzerConfig, DirectorConfig, HostConfig, Inventory
from lab.local import LocalHost
from power.director import OfficialPowerRequest, OfficialResult, measure_official
from tests.support.power_workload import loadgen_workload
from tests.support.sntp import SntpServer


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def official_power_run(checkout: Path, launcher: Path, work: Path, out: Path, *,
                       analyzer: str, label: str, lock_dir: Path) -> OfficialResult:
    """One ranging + testing run through power-dev, its output written to out."""
    with SntpServer() as ntp:
        inventory = Inventory(
            hosts=[HostConfig(name="local", transport="local", work_dir=str(work))],
            analyzers=[AnalyzerConfig(name=analyzer, port=free_port(), device_port="sim")],
            director=DirectorConfig(host="local", port=free_port(), ntp_server=ntp.address,
                                    power_dev=str(checkout), ptd=str(launcher),
                                    python=sys.executable))
        request = OfficialPowerRequest(analyzer=analyzer, label=label, out_dir=out,
                                       client_checkout=checkout, lock_dir=lock_dir)
        return measure_official(request, loadgen_workload("Offline", 12000),
                                sut=LocalHost("local", str(work)), inventory=inventory)
