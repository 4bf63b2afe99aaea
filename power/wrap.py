"""The official power path as a wrapper of an ordinary run: power-dev's client in the container.

A power run is started, reattached, collected and re-run like every other run
(`bench.execute`). Only its container command differs: power-dev's unmodified client (from a
checkout mounted read-only) runs the benchmark's LoadGen command twice under the director's
server, ranging then testing, on the host network so that it reaches the server and NTP. With
`-o .` it writes `power/`, `ranging/` and `run_1/` at the top of the run directory, which is
collected byte for byte into the run store, where assembly finds them. The verdict adds
power-dev's own `compliance/check.py` (its output kept as power_check.txt) to subrun's.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import power_metric
from bench.power_samples import read_samples
from bench.run import OUTPUT_DIR, RunRecord, Verdict
from bench.store import RunStore
from lab.config import Mount
from lab.errors import SubrunError
from power.check_report import parse_check, power_checks, run_check, with_power

CHECKOUT_MOUNT = "/subrun/power-dev"
CHECK_OUTPUT = "power_check.txt"


@dataclass(frozen=True)
class OfficialWrap:
    """power-dev's client around a power run's LoadGen runs, and power-dev's check after."""

    target_checkout: str  # the power-dev checkout on the run's host (mounted into the container)
    controller_checkout: Path  # the same commit on the controller, for compliance/check.py
    director_address: str
    director_port: int
    ntp_server: str
    label: str  # power-dev's session label (letters, digits, - and _)
    python: str = "python3"  # in the benchmark's image
    controller_python: str = sys.executable
    network: str = "host"
    mounts: tuple[Mount, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.mounts:
            # power-dev's NTP client finds its port by the service name "ntp": slim images
            # lack /etc/services (netbase), so the host's is lent to the container
            object.__setattr__(self, "mounts", (
                Mount(source=self.target_checkout, target=CHECKOUT_MOUNT),
                Mount(source="/etc/services", target="/etc/services")))

    def argv(self, harness: list[str]) -> list[str]:
        """power-dev's client, running the harness once for ranging and once for testing."""
        return [self.python, f"{CHECKOUT_MOUNT}/ptd_client_server/client.py",
                "-a", self.director_address, "-p", str(self.director_port),
                "-w", shlex.join(harness), "-L", OUTPUT_DIR, "-o", ".", "-T",
                "-n", self.ntp_server, "-l", self.label]

    def judge(self, store: RunStore, record: RunRecord, verdict: Verdict) -> Verdict:
        """subrun's verdict plus power-dev's check of the collected output and the power."""
        folder = store.path(record.key, record.attempt)
        if not (folder / "power" / "client.json").is_file():
            return verdict.model_copy(update={
                "passed": False, "submittable": False,
                "reason": "power-dev's client left no power/client.json: it did not finish a "
                          "session (see the run's output tail)."})
        _, text = run_check(self.controller_checkout, folder, self.controller_python)
        with tempfile.TemporaryDirectory(prefix="subrun-power-check-") as tmp:
            (Path(tmp) / CHECK_OUTPUT).write_text(text)
            store.add_files(record.key, record.attempt, Path(tmp))
        checks, submittable = power_checks(parse_check(text), ptd_identity(folder))
        return with_power(verdict, checks, submittable, power_metrics(folder))


def ptd_identity(folder: Path) -> str:
    """PTDaemon's reply to Identify, as power-dev's server recorded it in server.json."""
    try:
        server = json.loads((folder / "power" / "server.json").read_text())
    except (OSError, ValueError):
        return ""
    return next((m.get("reply", "") for m in server.get("ptd_messages", [])
                 if m.get("cmd") == "Identify"), "")


def power_metrics(folder: Path) -> dict[str, float]:
    """Average watts (and energy per query) of the testing run, over LoadGen's window."""
    run_1 = folder / "run_1"
    try:
        window = power_metric.read_window(run_1 / "mlperf_log_detail.txt")
        samples = read_samples(run_1 / "spl.txt")
        measured = power_metric.compute_metric(samples, window, str(run_1 / "spl.txt"))
    except SubrunError:
        return {}  # power-dev's check names what is missing
    found = {"power_w": measured.avg_power_w}
    if measured.energy_per_query_mj is not None:
        found["energy_per_query_mj"] = measured.energy_per_query_mj
    return found
