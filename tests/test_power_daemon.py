"""subrun's PTDaemon-protocol daemon with a pyvisa-sim analyzer, over real TCP on 127.0.0.1."""

from __future__ import annotations

import io
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from power import protocol
from power.client import PtdClient
from power.daemon import Daemon, DaemonOptions, parse_args
from power.instrument import (
    MODELS,
    AnalyzerError,
    RangeState,
    Reading,
    open_analyzer,
    round_up_range,
    uncertainty_w,
)
from power.protocol import LineSocket, Ranges, Sample

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    with Daemon(DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim"), stream=io.StringIO()) as d:
        yield d


class Raw:
    """A bare protocol connection, to see replies exactly as power-dev's server sees them."""

    def __init__(self, port: int) -> None:
        self.link = LineSocket(socket.create_connection(("127.0.0.1", port), timeout=10))

    def ask(self, command: str) -> list[str]:
        self.link.send_line(command)
        first = self.link.recv_line()
        assert first is not None, f"daemon closed the connection on {command!r}"
        lines = [first]
        if first.startswith("Last "):
            lines += [self.link.recv_line() or "" for _ in range(int(first.split()[1]))]
        return lines


def test_daemon_answers_power_devs_command_sequence(daemon: Daemon, tmp_path: Path) -> None:
    raw = Raw(daemon.port)
    assert raw.ask("Hello") == ["Hello, PTDaemon here!"]
    identify = raw.ask("Identify")[0]
    assert identify.startswith("YokogawaWT310E,")
    # honest: never SPEC PTDaemon's version, so the compliance checker's version check fails
    assert "version=" in identify and "1.11.1" not in identify and "subrun" in identify
    # the instrument's present state (a simulated instrument keeps it within one process)
    assert re.fullmatch(r"Ranges,[01],\d+\.\d{6},[01],\d+\.\d{6}", raw.ask("RR")[0])
    assert raw.ask("SR,V,Auto") == ["Range V changed"]
    assert raw.ask("SR,A,Auto") == ["Range A changed"]
    assert raw.ask("SR,A,Auto") == ["Range A changed"]
    assert raw.ask("Go,1000,0,s1_ranging") == [
        "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"]
    assert raw.ask("Load,busy") == ["Load changed"]
    time.sleep(2.3)
    assert raw.ask("Stop") == ["Stopping untimed measurement"]
    assert raw.ask("RL,*,*") == ["Invalid number of parameters"]  # single-channel meter
    samples = raw.ask("RL")
    assert samples[0] == f"Last {len(samples) - 1} samples" and len(samples) - 1 >= 2
    for line in samples[1:]:
        parsed = protocol.parse_sample_line(line)
        assert parsed is not None and parsed[1] is None  # RL lines carry no Mark
        assert 130 < parsed[0].watts < 160 and 228 < parsed[0].volts < 232
    assert raw.ask("RL") == ["Last 0 samples"]  # unread samples only
    assert raw.ask("Watts")[0].startswith("Watts,")
    assert raw.ask("Uncertainty")[0].startswith("Uncertainty,0.00")
    assert raw.ask("SR,V,230.474040") == ["Range V changed"]
    assert raw.ask("SR,A,0.7643966000000001") == ["Range A changed"]
    assert raw.ask("RR") == ["Ranges,0,1.000000,0,300.000000"]  # rounded up to real ranges
    assert raw.ask("Stop") == ["Error: no measurement to stop"]
    assert raw.ask("SR,A,50")[0].startswith("Error: ")
    assert raw.ask("SR,V,Auto") == ["Range V changed"]
    assert raw.ask("Bogus") == ["Unknown command"]
    for name in ("Volts", "Amps", "PF"):
        assert raw.ask(name)[0].startswith(f"{name},")

    log = (tmp_path / "ptd.log").read_text().splitlines()
    marked = [protocol.parse_sample_line(line) for line in log]
    assert marked and all(m is not None and m[1] == "s1_ranging" for m in marked)
    assert log[0].startswith("Time,") and ",Mark,s1_ranging" in log[0]


def test_console_carries_the_lines_powerdevs_checks_look_for(daemon: Daemon) -> None:
    client = PtdClient("127.0.0.1", daemon.port)
    client.connect()
    client.go(200, "sess_ranging")
    time.sleep(0.5)
    client.stop()
    client.close()
    text = daemon.console._stream.getvalue()  # type: ignore[attr-defined]
    first = text.splitlines()[0]
    assert "NOT SPEC PTDaemon" in first
    assert ": Uncertainty checking for YokogawaWT310E is activated" in text
    assert ": Go with mark 'sess_ranging'" in text
    assert text.index("is activated") < text.index("Go with mark") < text.index(": Completed test")
    stamp = text.splitlines()[1][:23]
    assert abs((protocol.parse_time(stamp) - datetime.now(UTC)).total_seconds()) < 60  # UTC
    assert any(",Watts," in line and line.endswith(",Mark,sess_ranging") for line in
               text.splitlines())


def test_a_second_client_may_ask_but_not_measure_while_another_holds_the_session(
        tmp_path: Path) -> None:
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", idle_timeout_s=1.0)
    with Daemon(options, stream=io.StringIO()) as daemon:
        holder = PtdClient("127.0.0.1", daemon.port)
        holder.connect()
        holder.go(200, "held")  # the first state-changing command takes the session
        other = PtdClient("127.0.0.1", daemon.port)
        assert other.connect().model == "YokogawaWT310E"  # a second client is served
        assert other.command("Watts").startswith("Watts,")  # and may ask
        for command in ("Stop", "Go,1000,0,stolen", "SR,V,Auto", "RL", "Load,idle"):
            reply = other.command(command)
            assert reply.startswith("Error: 127.0.0.1:") and "holds the measurement session" \
                in reply and f"{command.split(',')[0]} is refused" in reply, reply
        time.sleep(1.5)  # past the idle timeout: waiting out its own measurement is not idling
        assert len(holder.read_samples()) >= 3  # the samples were not taken by the other
        # the other one, idle without a measurement of its own, was dropped meanwhile
        assert other.command("Watts").startswith("Error: idle for 1 s")
        holder.stop()
        holder.close()  # leaving frees the session
        third = PtdClient("127.0.0.1", daemon.port)
        third.connect()
        deadline = time.monotonic() + 5
        while third.command("SR,V,Auto") != "Range V changed":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        third.close()


def test_an_idle_client_is_dropped_and_no_longer_locks_out_the_next(tmp_path: Path) -> None:
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", idle_timeout_s=0.6)
    with Daemon(options, stream=io.StringIO()) as daemon:
        idle = Raw(daemon.port)
        assert idle.ask("SR,V,Auto") == ["Range V changed"]  # holds the session, then idles
        idle.link.sock.settimeout(5)
        started = time.monotonic()
        dropped = idle.link.recv_line()
        assert dropped is not None and dropped.startswith("Error: idle for 0.6 s")
        assert idle.link.recv_line() is None  # and the connection is closed
        assert 0.5 < time.monotonic() - started < 3
        second = PtdClient("127.0.0.1", daemon.port)
        second.connect()
        second.go(1000, "next")  # the session is free again
        second.stop()
        second.close()
        console = daemon.console._stream.getvalue()  # type: ignore[attr-defined]
        assert "Session released by 127.0.0.1:" in console


def test_unplugged_analyzer_aborts_the_measurement_and_keeps_samples(
        daemon: Daemon, tmp_path: Path) -> None:
    client = PtdClient("127.0.0.1", daemon.port)
    client.connect()
    client.go(200, "s_testing")
    time.sleep(0.7)
    assert daemon.meter is not None
    daemon.meter.analyzer.resource.close()  # the cable is pulled: every VISA call now fails
    time.sleep(0.5)
    reply = client.command("Stop")
    assert reply.startswith("Error: measurement 's_testing' was aborted: the analyzer stopped "
                            "answering at ")
    assert len(client.read_samples()) >= 2  # what was measured stays readable
    assert client.command("Watts").startswith("Error: the analyzer stopped answering")
    assert client.command("Go,1000,0,again").startswith("Error: ")
    log = (tmp_path / "ptd.log").read_text()
    assert ",ERROR,the analyzer stopped answering" in log and log.count(",Mark,s_testing") >= 2


def test_daemon_process_takes_ptd_argv_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    for round_ in range(2):  # the second start proves the port was released
        proc = subprocess.Popen(
            [sys.executable, "-m", "power.daemon", "-l", str(tmp_path / "l.log"), "-p",
             str(port), "-y", "49", "sim"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
            env={**os.environ, "TZ": "UTC"})
        try:
            _wait_listening(proc)
            client = PtdClient("127.0.0.1", port)
            assert client.connect().model == "YokogawaWT310E"
            proc.send_signal(signal.SIGTERM)  # with a client still connected
            assert proc.wait(timeout=10) == 0, f"round {round_}"
            client.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_bad_arguments_get_one_clear_error(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "power.daemon", "-l",
                               str(tmp_path / "x.log"), "-p", "0", *args],
                              capture_output=True, text=True, timeout=60)

    wt210 = run("8", "/dev/ttyS1")
    assert wt210.returncode == 1
    assert "Device type 8 is not supported" in wt210.stdout and "Traceback" not in wt210.stdout
    usbtmc = run("49", "/dev/usbtmc0")
    assert usbtmc.returncode == 1 and "neither a VISA resource string" in usbtmc.stdout
    dc = run("-D", "49", "sim")
    assert dc.returncode == 2 and "DC measurement" in dc.stderr


def test_parse_args_matches_power_devs_launch_line() -> None:
    options = parse_args(["-l", "/tmp/t/ptd_logfile_1.log", "-p", "8888", "-c", "2", "-y",
                          "52", "SIMWT333E"])
    assert (options.port, options.device_type, options.device_port) == (8888, 52, "SIMWT333E")
    assert options.channel == 2 and options.interface_flag == "-y"
    assert options.analyzer() == ("WT333E", "SIMWT333E")
    assert parse_args(["-l", "x", "-p", "1", "49", "sim:WT310"]).analyzer() == ("WT310", "sim")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_shipped_simulator_reads_and_ranges(model: str) -> None:
    analyzer = open_analyzer(model, "sim")
    try:
        assert analyzer.idn.split(",")[1] == model
        idle = analyzer.read()
        analyzer.set_load(True)
        busy = analyzer.read()
        assert 0 < idle.watts < busy.watts and 0.8 < busy.pf <= 1
        assert analyzer.set_range("voltage", 230.47) == 300.0
        top = MODELS[model].amps_ranges[-1]
        assert analyzer.set_range("current", top) == top
        assert analyzer.ranges() == RangeState(False, 300.0, False, top)
        assert analyzer.set_range("current", None) is None and analyzer.ranges().amps_auto
        with pytest.raises(AnalyzerError, match="above the largest range"):
            analyzer.set_range("current", top * 2)
    finally:
        analyzer.close()


def test_wrong_model_for_the_instrument_is_named() -> None:
    wt310 = Path(__file__).resolve().parent.parent / "power" / "wt310.yaml"
    with pytest.raises(AnalyzerError, match="is a 'WT310', not the WT310E configured"):
        open_analyzer("WT310E", "sim", sim_path=wt310)


def test_range_rounding_and_uncertainty() -> None:
    amps = MODELS["WT310E"].amps_ranges
    assert round_up_range(0.7643966000000001, amps, "current", "WT310E") == 1.0
    assert round_up_range(0.004, amps, "current", "WT310E") == 0.005
    assert round_up_range(2.0, amps, "current", "WT310E") == 2.0
    spec = MODELS["WT310E"]
    # unity power factor: 0.1 % of reading + 0.05 % of the 300 V x 1 A range
    fixed = RangeState(False, 300, False, 1)
    at_unity = uncertainty_w(spec, Reading(230.0, 0.6, 138.0, 1.0), fixed)
    assert at_unity == pytest.approx(0.001 * 138.0 + 0.0005 * 300 * 138.0 / (230 * 0.6))
    assert math.isnan(uncertainty_w(spec, Reading(0, 0, 0, 0), fixed))


def test_protocol_lines_round_trip() -> None:
    moment = datetime(2020, 12, 23, 10, 21, 51, 496000, tzinfo=UTC)
    line = Sample(moment, 23.43, 228.37, 0.20428, 0.5023).log_line("testing-workload")
    assert line == ("Time,12-23-2020 10:21:51.496,Watts,23.430000,Volts,228.370000,"
                    "Amps,0.204280,PF,0.502300,Mark,testing-workload")  # PTDaemon's own format
    parsed = protocol.parse_sample_line(line)
    assert parsed is not None and parsed[0].time == moment and parsed[1] == "testing-workload"
    assert protocol.parse_sample_line("Time,12-23-2020 10:21:51.496,NOTICE,identity") is None
    ranges = Ranges.parse("Ranges,0,1.000000,1,-1.000000")
    assert ranges.initial("A") == "1.000000" and ranges.initial("V") == "Auto"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "Listening on" in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"daemon did not start (exit {proc.poll()})")


def test_a_port_served_by_another_process_is_refused_not_read(tmp_path: Path) -> None:
    """Another inventory's daemon (or anything) on the analyzer's port: its samples would never
    reach this analyzer's log, so subrun says so instead of measuring nothing."""
    import socket

    from lab.config import AnalyzerConfig
    from lab.errors import PowerError
    from lab.local import LocalHost
    from power.service import ensure_daemon

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        analyzer = AnalyzerConfig(name="sim-taken", port=port, host="local")
        with pytest.raises(PowerError, match=rf"Port {port} on 127.0.0.1 is served by a process "
                                             "subrun did not start for analyzer 'sim-taken'"):
            ensure_daemon(LocalHost("local", str(tmp_path)), analyzer, address="127.0.0.1")
