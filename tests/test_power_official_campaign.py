"""A campaign with `power: official` on a lab host: the flow starts power-dev's unmodified server
on the director (here the controller, which also runs subrun's daemon standing in for PTDaemon)
and runs power-dev's client in the benchmark's container on h2, wrapping its LoadGen run. The
tree's power folders must be power-dev's output byte for byte, and power-dev's own check must
pass every check but the PTDaemon identity, which the verdict reports.

Uses the pinned official power-dev (SUBRUN_POWER_DEV, else ../shared/official/power-dev);
failing when neither exists. A few minutes: two LoadGen passes plus power-dev's fixed pauses.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench.campaign import load_campaign
from bench.run import RunKind
from bench.store import RunStore
from power.check_report import IDENTITY_CHECK, parse_check
from testkit.official import POWER_DEV
from tests.support.campaigns import write_campaign
from tests.support.official_power import free_port
from tests.support.sntp import SntpServer
from tests.test_power_dev import ptd_launcher  # noqa: F401  (a fixture)

pytestmark = pytest.mark.lab
CHECKOUT = POWER_DEV or Path("/nonexistent/power-dev")
needs_checkout = pytest.mark.official("power-dev")


@pytest.fixture
def ntp() -> Iterator[SntpServer]:
    with SntpServer() as server:
        yield server


def official_inventory(lab_dir: Path, folder: Path, launcher: Path, ntp: SntpServer) -> Path:
    """The lab's hosts.yaml plus an analyzer on a port of its own and the controller as
    director, running power-dev with subrun's daemon behind the PTD launcher."""
    inventory = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    # a name of its own: the lab's hosts (and their detached processes) are shared
    inventory["analyzers"] = [{"name": f"pd-{secrets.token_hex(3)}", "model": "WT310E",
                               "resource": "sim", "host": "local", "port": free_port(),
                               "device_port": "sim"}]
    for host in inventory["hosts"]:  # every host is measured by that analyzer
        host["power"] = {"analyzer": inventory["analyzers"][0]["name"]}
    inventory["director"] = {"host": "local", "port": free_port(), "ntp_server": ntp.address,
                             "power_dev": str(CHECKOUT), "ptd": str(launcher),
                             "python": sys.executable}
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


@needs_checkout
def test_official_power_campaign_on_a_lab_host(prefect_api: None,
                                               lab_dir: Path, tmp_path: Path,
                                               ptd_launcher: Path,  # noqa: F811
                                               ntp: SntpServer) -> None:
    from flows.submission import submission

    hosts = official_inventory(lab_dir, tmp_path, ptd_launcher, ntp)
    path = write_campaign(tmp_path, "official-power", hosts, ["h2"],
                          settings={"Offline": {"min_duration": 6000}})
    text = path.read_text().replace("power: false", "power: official")
    path.write_text(text)
    summary = submission(campaign_file=str(path))
    assert summary.runs == 3 and summary.passed == 3, summary.failed

    store = RunStore(load_campaign(path).paths.store)
    power = next(r for r in store.runs() if r.spec.kind is RunKind.POWER)
    assert power.verdict is not None and power.verdict.passed, power.verdict
    assert not power.verdict.submittable  # subrun's daemon is not SPEC PTDaemon
    identity = next(c for c in power.verdict.checks if c.name == "ptd_identity")
    assert "not SPEC PTDaemon" in identity.detail and "subrun" in identity.detail
    assert 10 < power.verdict.metrics["power_w"] < 1000
    report_md = (Path(summary.report).parent / "report.md").read_text()
    assert "not SPEC PTDaemon" in report_md  # reported to whoever reads the report, too

    folder = store.path(power.key, power.attempt)
    report = parse_check((folder / "power_check.txt").read_text())
    assert list(report.failed) == [IDENTITY_CHECK], report  # every other check passes
    assert "1.11.1" in report.failed[IDENTITY_CHECK]
    assert len(report.passed) == 10, report

    performance = next(Path(summary.tree).glob("open/*/results/h2/*/Offline/performance"))
    for name in ("power/client.json", "power/client.log", "power/ptd_logs.txt",
                 "power/server.json", "power/server.log", "ranging/spl.txt",
                 "ranging/mlperf_log_detail.txt", "run_1/spl.txt",
                 "run_1/mlperf_log_detail.txt", "run_1/mlperf_log_summary.txt"):
        assert (performance / name).read_bytes() == (folder / name).read_bytes(), name
