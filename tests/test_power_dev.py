"""The official path: power-dev's unmodified server and client drive subrun's daemon.

Needs a checkout of mlcommons/power-dev (SUBRUN_POWER_DEV=<path>, else the pinned snapshot) and
fails without one. NTP is served by a test responder on an address of its own in 127.0.0.0/8,
and power-dev's server starts subrun's daemon through a launcher in place of SPEC PTDaemon. The
compliance checker must then pass every check but one: PTDaemon's version, because subrun's
daemon says honestly what it is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.config import AnalyzerConfig, DirectorConfig, HostConfig, Inventory
from lab.errors import PowerError
from lab.local import LocalHost
from power.check_report import run_check
from power.director import OfficialPowerRequest, measure_official
from power.powerdev import ServerPlan, server_conf, verify_checkout
from power.service import launcher_script
from testkit.official import POWER_DEV
from tests.support.official_power import free_port, official_power_run
from tests.support.power_tree import POWER_FILES, check_tree_with_official_power
from tests.support.power_workload import loadgen_workload

CHECKOUT = str(POWER_DEV) if POWER_DEV else None
needs_checkout = pytest.mark.official("power-dev")


@pytest.fixture
def ptd_launcher(tmp_path: Path) -> Iterator[Path]:
    """subrun's daemon behind a `ptd` executable that records its pid, to clean up by pid."""
    pids = tmp_path / "daemon.pids"
    launcher = tmp_path / "subrun-ptd"
    text = launcher_script(sys.executable)
    launcher.write_text(text.replace("exec ", f'echo $$ >> "{pids}"\nexec ', 1))
    launcher.chmod(0o755)
    yield launcher
    for pid in (pids.read_text().split() if pids.exists() else []):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)  # only if power-dev left one behind


def test_server_conf_has_the_analyzer_section() -> None:
    plan = ServerPlan("a1", "/opt/power-dev", "python3", "/opt/ptd/ptd-linux-x86", "0.0.0.0",
                      4950, "pool.ntp.org", 49, "/dev/usbtmc0", 8888)
    conf = server_conf(plan)
    assert "[analyzer1]\ndeviceType: 49\ninterfaceFlag: \ndevicePort: /dev/usbtmc0\n" in conf
    assert "ptd: /opt/ptd/ptd-linux-x86\nanalyzerCount: 1" in conf
    assert "ntpServer: pool.ntp.org\nlisten: 0.0.0.0 4950" in conf


@needs_checkout
def test_modified_checkout_is_refused(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "power-dev"
    shutil.copytree(str(CHECKOUT), copy, ignore=shutil.ignore_patterns("__pycache__"))
    host = LocalHost("director", str(tmp_path))
    verify_checkout(host, str(copy), sys.executable)  # pristine: accepted
    with (copy / "ptd_client_server" / "lib" / "client.py").open("a") as f:
        f.write("\n")
    (copy / "ptd_client_server" / "extra.py").write_text("")
    with pytest.raises(PowerError, match=r"changed \['lib/client.py'\], added \['extra.py'\]"):
        verify_checkout(host, str(copy), sys.executable)


@needs_checkout
def test_power_dev_drives_subruns_daemon_and_its_output_enters_the_tree_byte_for_byte(
        tmp_path: Path, ptd_launcher: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """One ranging + testing pass through power-dev (a minute of its fixed pauses), judged by
    power-dev's check, then placed in a tree that the prechecks and the official checker read."""
    checkout = Path(str(CHECKOUT))
    work = tmp_path / "work"
    sut = LocalHost("local", str(work))
    out = tmp_path / "results" / "performance"
    result = official_power_run(checkout, ptd_launcher, work, out, analyzer="sim-pd",
                                label="pdtest", lock_dir=tmp_path / "locks")
    server = sut.find_detached("power-server-sim-pd")
    assert server is not None and not sut.poll_detached(server).running  # stopped again
    assert sut.poll_detached(server).exit_status == 0  # gracefully
    assert result.ptd_identity.startswith("YokogawaWT310E,") and "subrun" in result.ptd_identity
    for folder, names in POWER_FILES.items():
        assert {p.name for p in (out / folder).iterdir()} == names, folder
    assert 30 < result.avg_power_w < 50  # power-dev sends no load hint: the idle profile
    assert not result.submittable and "subrun" in result.ptd_identity

    passed, report = run_check(checkout, out)
    failed = [line for line in report.splitlines() if "[ ]" in line]
    assert not passed
    assert failed == [line for line in failed if "Check PTD commands and replies" in line], report
    assert len(failed) == 1, report
    assert "1.11.1" in report  # the version check is the one that fails, on purpose

    check_tree_with_official_power(out, tmp_path, tmp_path_factory)


def test_relay_runs_the_workload_phases_in_order(tmp_path: Path) -> None:
    import subprocess

    from power.phase import WorkloadCall
    from power.relay import RelayServer

    seen: list[WorkloadCall] = []

    def workload(call: WorkloadCall) -> None:
        seen.append(call)
        if call.phase == "testing":
            raise RuntimeError("the benchmark container exited 137")

    with RelayServer(workload, tmp_path / "loadgen", short_ranging=True) as relay:
        command = relay.command(sys.executable)
        runs = [subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
                for _ in range(3)]  # as power-dev's client runs `-w`, with a shell
    assert [r.returncode for r in runs] == [0, 1, 1]
    assert "testing workload failed: the benchmark container exited 137" in runs[1].stderr
    assert "third workload run" in runs[2].stderr
    assert [(c.phase, c.short, c.out_dir.name) for c in seen] == [
        ("ranging", True, "ranging"), ("testing", False, "testing")]
    assert isinstance(relay.errors[0], RuntimeError)


def test_official_preflight_refuses_without_a_usable_director(tmp_path: Path) -> None:
    work = tmp_path / "work"
    sut = LocalHost("local", str(work))
    hosts = [HostConfig(name="local", transport="local", work_dir=str(work))]
    analyzers = [AnalyzerConfig(name="wt", port=free_port())]
    request = OfficialPowerRequest(analyzer="wt", label="x", out_dir=tmp_path / "perf",
                                   client_checkout=tmp_path / "no-checkout",
                                   lock_dir=tmp_path / "locks")
    bare = Inventory(hosts=hosts, analyzers=analyzers)
    with pytest.raises(PowerError, match="no `director:`"):
        measure_official(request, loadgen_workload("Offline"), sut=sut, inventory=bare)
    half = bare.model_copy(update={"director": DirectorConfig(host="local", ntp_server="ntp")})
    with pytest.raises(PowerError, match="lacks power_dev, ptd") as caught:
        measure_official(request, loadgen_workload("Offline"), sut=sut, inventory=half)
    assert "pre-flight for 'x' failed; nothing was measured" in str(caught.value)
    full = bare.model_copy(update={"director": DirectorConfig(
        host="local", ntp_server="ntp", power_dev=str(tmp_path), ptd="/opt/ptd")})
    with pytest.raises(PowerError, match="client checkout official: Could not hash"):
        measure_official(request, loadgen_workload("Offline"), sut=sut, inventory=full)
    assert not (tmp_path / "perf").exists()
