"""Power runs on subrun's own path: real LoadGen workloads under subrun's daemon (sim WT310E)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import power_metric
from bench.power_samples import parse_samples
from lab.config import AnalyzerConfig, HostConfig, Inventory
from lab.errors import PowerError
from lab.local import LocalHost
from power.daemon import Daemon, DaemonOptions
from power.lock import analyzer_lock, lock_holder
from power.measure import PowerRequest, measure_power, prepare
from power.preflight import PreflightReport, check_clocks
from power.protocol import Ranges
from power.service import stop_daemon
from power.session import PowerSettings, run_power
from tests.support.power_workload import loadgen_workload

RUN_FILES = {"mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt"}


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    options = DaemonOptions(tmp_path / "daemon" / "ptd.log", 0, 49, "sim")
    with Daemon(options, stream=io.StringIO()) as d:
        yield d


def settings_for(port: int, out_dir: Path, label: str = "t") -> PowerSettings:
    return PowerSettings(analyzer="sim", address="127.0.0.1", port=port, label=label,
                         out_dir=out_dir, settle_s=0.5, interval_ms=250, poll_s=0.5)


def test_ranging_then_testing_produces_the_checkers_folders(daemon: Daemon, tmp_path: Path) -> None:
    def console(dest: Path) -> None:
        dest.write_text(daemon.console._stream.getvalue())  # type: ignore[attr-defined]

    out = tmp_path / "performance"
    result = run_power(settings_for(daemon.port, out), loadgen_workload("Offline"), console)

    for phase in ("ranging", "run_1"):
        assert {p.name for p in (out / phase).iterdir()} == RUN_FILES  # checker §5.1
    assert {p.name for p in (out / "power").iterdir()} == {
        "subrun_session.json", "power_trace.png", "ptd_logs.txt"}
    spl = (out / "run_1" / "spl.txt").read_text()
    assert spl.endswith("\n\n")  # one blank line at the end, like power-dev's
    lines = spl.strip().splitlines()
    assert all(line.startswith("Time,") and line.endswith(f",Mark,{result.session}_testing")
               for line in lines)
    assert (out / "ranging" / "spl.txt").read_text().strip().endswith("_ranging")

    # the simulated load is busy (136..152 W) while LoadGen runs
    assert 136 <= result.avg_power_w <= 152 and result.samples_in_window >= 4
    assert result.energy_per_query_mj is None and result.scenario == "Offline"
    window = power_metric.read_window(out / "run_1" / "mlperf_log_detail.txt")
    again = power_metric.compute_metric(parse_samples(spl), window, "t")
    assert again.avg_power_w == pytest.approx(result.avg_power_w)  # as the checker computes it
    assert float(result.testing_volts) > 228 and 0.6 * 1.1 < float(result.testing_amps) < 0.78
    assert not result.submittable and "not SPEC PTDaemon" in result.notes[0]
    assert (out / "power" / "power_trace.png").read_bytes()[:4] == b"\x89PNG"
    assert "Go with mark" in (out / "power" / "ptd_logs.txt").read_text()

    exchanged = json.loads((out / "power" / "subrun_session.json").read_text())["ptd_messages"]
    messages = [m["cmd"] for m in exchanged]
    assert messages[:3] == ["Hello", "Identify", "RR"]
    assert f"SR,A,{result.testing_amps}" in messages
    initial = Ranges.parse(exchanged[2]["reply"])  # restored at the end, as power-dev does
    assert messages[-2:] == [f"SR,V,{initial.initial('V')}", f"SR,A,{initial.initial('A')}"]


def test_single_stream_reports_energy_per_query(daemon: Daemon, tmp_path: Path) -> None:
    settings = settings_for(daemon.port, tmp_path / "ss").model_copy(
        update={"short_ranging": True})
    result = run_power(settings, loadgen_workload("SingleStream", 1500))
    window = power_metric.read_window(tmp_path / "ss" / "run_1" / "mlperf_log_detail.txt")
    assert result.scenario == "SingleStream" and window.result_query_count > 100
    expected = result.avg_power_w * window.duration_s * 1000 / window.result_query_count
    assert result.energy_per_query_mj == pytest.approx(expected)
    assert result.headline.endswith("mJ/query")
    assert any("Shortened ranging" in note for note in result.notes)


def test_analyzer_unplugged_mid_testing_fails_the_run_and_keeps_samples(
        daemon: Daemon, tmp_path: Path) -> None:
    assert daemon.meter is not None
    unplug = threading.Timer(1.2, daemon.meter.analyzer.resource.close)
    out = tmp_path / "performance"
    with pytest.raises(PowerError) as caught:
        run_power(settings_for(daemon.port, out), loadgen_workload("Offline", during={
            "testing": unplug}))
    message = str(caught.value)
    assert "The testing phase" in message and "the analyzer stopped answering" in message
    kept = (out / "run_1" / "spl.txt").read_text().strip().splitlines()
    assert len(kept) >= 3 and f"{len(kept)} samples measured before the failure" in message
    assert str(out / "run_1" / "spl.txt") in message
    assert len((out / "ranging" / "spl.txt").read_text().strip().splitlines()) >= 4
    daemon_log = (tmp_path / "daemon" / "ptd.log").read_text()
    assert ",ERROR,the analyzer stopped answering" in daemon_log


def lab_inventory_for(tmp_path: Path) -> Inventory:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return Inventory(
        hosts=[HostConfig(name="local", transport="local", work_dir=str(tmp_path / "work"))],
        analyzers=[AnalyzerConfig(name=f"sim-{uuid.uuid4().hex[:8]}", port=port)])


def test_daemon_killed_mid_run_then_restarted_for_the_next_run(tmp_path: Path) -> None:
    inventory = lab_inventory_for(tmp_path)
    analyzer = inventory.analyzers[0]
    sut = LocalHost("local", str(tmp_path / "work"))
    request = PowerRequest(analyzer=analyzer.name, label="killed", out_dir=tmp_path / "r1",
                           settle_s=0.5, interval_ms=250, lock_dir=tmp_path / "locks")
    try:
        endpoint, report = prepare(request, sut=sut, daemon_host=sut, inventory=inventory)
        assert report.ok, report.checks
        assert endpoint is not None
        names = [c.name for c in report.checks]
        assert {"daemon answering", "analyzer identity",
                "clock offset SUT vs daemon host"} <= set(names)
        group = endpoint.handle.pid  # the detached wrapper leads its own process group
        kill = threading.Timer(1.2, os.killpg, args=(group, signal.SIGKILL))
        with pytest.raises(PowerError) as caught:
            measure_power(request, loadgen_workload("Offline", during={"testing": kill}),
                          sut=sut, inventory=inventory)
        message = str(caught.value)
        assert "The testing phase" in message and "closed the connection" in message
        kept = (tmp_path / "r1" / "run_1" / "spl.txt").read_text().strip().splitlines()
        assert len(kept) >= 3 and f"{len(kept)} samples measured" in message
        logged = [line for line in (tmp_path / "work" / "power" / analyzer.name /
                                    "samples.log").read_text().splitlines()
                  if line.endswith("_testing")]
        assert kept == logged  # every sample the daemon logged before it died is kept
        assert lock_holder(analyzer.name, lock_dir=tmp_path / "locks") is None  # released

        second = request.model_copy(update={"label": "after", "out_dir": tmp_path / "r2"})
        result = measure_power(second, loadgen_workload("Offline"), sut=sut,
                               inventory=inventory)
        assert 136 <= result.avg_power_w <= 152
        assert (tmp_path / "r2" / "power" / "ptd_logs.txt").exists()
    finally:
        handle = sut.find_detached(f"power-daemon-{analyzer.name}")
        if handle is not None and sut.poll_detached(handle).running:
            stop_daemon(sut, handle)


def test_preflight_names_a_daemon_that_cannot_start(tmp_path: Path) -> None:
    inventory = lab_inventory_for(tmp_path)
    bad = inventory.analyzers[0].model_copy(update={"resource": "USB0::0x0B21::0x0025::NONE::INSTR",
                                                    "visa_library": "@nonexistent"})
    inventory = inventory.model_copy(update={"analyzers": [bad]})
    sut = LocalHost("local", str(tmp_path / "work"))
    request = PowerRequest(analyzer=bad.name, label="bad", out_dir=tmp_path / "r",
                           lock_dir=tmp_path / "locks")
    with pytest.raises(PowerError, match="pre-flight for 'bad' failed") as caught:
        measure_power(request, loadgen_workload("Offline"), sut=sut, inventory=inventory)
    assert "exited with status 1 while starting" in str(caught.value)
    assert "Could not open the WT310E" in str(caught.value)
    assert not (tmp_path / "r").exists()  # nothing was measured


def test_one_run_per_analyzer(tmp_path: Path) -> None:
    with analyzer_lock("wt", "campaign-a/run-1", lock_dir=tmp_path):
        holder = lock_holder("wt", lock_dir=tmp_path)
        assert holder is not None and holder["holder"] == "campaign-a/run-1"
        with (pytest.raises(PowerError, match="in use by run 'campaign-a/run-1'"),
              analyzer_lock("wt", "campaign-b/run-7", lock_dir=tmp_path, timeout_s=0.3)):
            pass
        with analyzer_lock("other", "campaign-b/run-7", lock_dir=tmp_path):
            pass  # another analyzer is free
    with analyzer_lock("wt", "campaign-b/run-7", lock_dir=tmp_path):
        pass  # free once released
    assert lock_holder("wt", lock_dir=tmp_path) is None


@pytest.mark.lab
def test_clock_offset_between_sut_and_director_over_ssh(lab_inventory: Inventory,
                                                        tmp_path: Path) -> None:
    from lab.transport import open_host

    report = PreflightReport()
    with open_host(lab_inventory.host("h2")) as h2:
        check_clocks(report, h2, LocalHost("local", str(tmp_path)), "director")
    check = report.checks[0]
    assert check.ok, check.detail
    assert "h2" in check.detail and "limit 400 ms" in check.detail
