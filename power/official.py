"""Submittable power runs: SPEC PTDaemon behind the unmodified power-dev server and client.

The flow starts the server on the director (`power.powerdev.start_power_server`), then
`run_official` runs power-dev's own client on the controller with `-T`, its workload being the
relay to the session's workload callable, and places the output in the run's performance
directory byte for byte:

    power/{client.json, client.log, ptd_logs.txt, server.json, server.log}
    ranging/{mlperf_log_detail.txt, mlperf_log_summary.txt, spl.txt}
    run_1/{mlperf_log_detail.txt, mlperf_log_summary.txt, spl.txt}

Every placed file is checked against the sha1 power-dev recorded for it; `run_1/ptd_out.txt`
stays in the scratch directory because the submission checker rejects it in run_1/.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from bench import power_metric
from bench.power_samples import read_samples
from lab.errors import CommandTimedOut, PowerError
from lab.local import LocalHost
from power.phase import Workload
from power.powerdev import verify_checkout
from power.relay import RelayServer
from power.session import Label

PLACED = {
    "power": ("client.json", "client.log", "ptd_logs.txt", "server.json", "server.log"),
    "ranging": ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt"),
    "run_1": ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "spl.txt"),
}


class OfficialRequest(BaseModel):
    """One power run through power-dev's client."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: Label
    out_dir: Path  # the run's performance directory
    director_address: str
    director_port: int = Field(default=4950, ge=1, le=65535)
    ntp_server: str
    client_checkout: Path  # power-dev checkout on the controller
    python: str = sys.executable
    short_ranging: bool = False  # makes the result unsubmittable
    timeout_s: float = Field(default=6 * 3600, gt=0)
    allowed_sources: list[dict[str, str]] | None = None  # the round's sources_checksums.json


class OfficialResult(BaseModel):
    """What power-dev produced, placed, and what it measured."""

    model_config = ConfigDict(frozen=True)

    out_dir: Path
    session: str
    scenario: str
    avg_power_w: float
    energy_per_query_mj: float | None
    samples_in_window: int
    ptd_identity: str
    submittable: bool


def run_official(request: OfficialRequest, workload: Workload) -> OfficialResult:
    """Run power-dev's client against a running server and place its output untouched."""
    controller = LocalHost("controller", str(request.out_dir.parent))
    verify_checkout(controller, str(request.client_checkout), request.python,
                    request.allowed_sources)
    scratch = request.out_dir.parent / f"{request.out_dir.name}.power-dev"
    if scratch.exists():
        shutil.rmtree(scratch)
    (scratch / "out").mkdir(parents=True)
    with RelayServer(workload, scratch / "loadgen", short_ranging=request.short_ranging) as relay:
        argv = [request.python, str(request.client_checkout / "ptd_client_server" / "client.py"),
                "-a", request.director_address, "-p", str(request.director_port),
                "-w", relay.command(request.python), "-L", str(scratch / "loadgen"),
                "-o", str(scratch / "out"), "-n", request.ntp_server, "-T", "-l", request.label]
        try:
            done = controller.run(argv, check=False, timeout_s=request.timeout_s,
                                  cwd=str(request.client_checkout))
            ended = f"exited with status {done.exit_status}"
        except CommandTimedOut as e:  # final: a power run is not started again by a retry
            done, ended = e.result, f"did not finish within {request.timeout_s:g} s"
    (scratch / "client.out").write_text(done.stdout + done.stderr)
    if not done.ok:
        cause = f" The workload failed: {relay.errors[0]}" if relay.errors else ""
        raise PowerError(f"power-dev's client {ended} for '{request.label}'.{cause} Its output "
                         f"is in {scratch}/client.out; last lines:\n{done.tail(15)}")
    session = place_output(scratch / "out", request.out_dir)
    return _result(request, session)


def place_output(source: Path, out_dir: Path) -> str:
    """Copy power-dev's files into out_dir and check each against its recorded sha1."""
    recorded: dict[str, str] = {}
    session = ""
    for name in ("client.json", "server.json"):
        data = json.loads((source / "power" / name).read_text())
        recorded.update(data.get("results", {}))
        session = data.get("session_name", session)
    for folder, names in PLACED.items():
        (out_dir / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            target = out_dir / folder / name
            shutil.copyfile(source / folder / name, target)
            expected = recorded.get(f"{folder}/{name}")
            actual = hashlib.sha1(target.read_bytes()).hexdigest()
            if expected is not None and expected != actual:
                raise PowerError(f"{target} does not match the sha1 power-dev recorded for it "
                                 f"({actual} != {expected}); the copy is not byte-identical.")
    return session


def _result(request: OfficialRequest, session: str) -> OfficialResult:
    out = request.out_dir
    detail = out / "run_1" / "mlperf_log_detail.txt"
    window = power_metric.read_window(detail)
    samples = read_samples(out / "run_1" / "spl.txt")
    measured = power_metric.compute_metric(samples, window, str(out / "run_1" / "spl.txt"))
    server = json.loads((out / "power" / "server.json").read_text())
    identity = next((m["reply"] for m in server.get("ptd_messages", [])
                     if m.get("cmd") == "Identify"), "")
    return OfficialResult(
        out_dir=out, session=session, scenario=window.scenario,
        avg_power_w=measured.avg_power_w, energy_per_query_mj=measured.energy_per_query_mj,
        samples_in_window=measured.samples_in_window, ptd_identity=identity,
        submittable=not request.short_ranging and "subrun" not in identity)
