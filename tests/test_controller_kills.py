"""`subrun run` killed (SIGKILL to its process group) at three more moments than a running
container: while the hosts are provisioned, while a finished run is collected, and while the
tree is assembled. Started again each time, the campaign ends with every run done exactly
once and the tree assembled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from tests.support.campaigns import write_campaign
from tests.support.prefect_home import fresh_home
from tests.test_link_campaign import done_exactly_once

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent
SUBRUN = Path(sys.executable).parent / "subrun"


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PREFECT_HOME": str(fresh_home(tmp_path / "prefect")),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "200"}


def kill_when(path: Path, tmp_path: Path, moment: str,
              now: Callable[[str], bool]) -> None:
    """Start `subrun run`; SIGKILL its process group once now(output so far) holds."""
    log = tmp_path / f"{moment}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(SUBRUN), "run", str(path)], env=env(tmp_path), cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 240
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if now(log.read_text(errors="replace")):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
                    return
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    pytest.fail(f"`subrun run` never reached {moment}:\n{log.read_text()[-3000:]}")


def test_kills_at_provisioning_collection_and_assembly(lab_dir: Path, tmp_path: Path) -> None:
    name = f"kills-{uuid.uuid4().hex[:8]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"],
                          scenarios=("SingleStream",),
                          settings={"SingleStream": {"min_duration": 1000}})
    campaign = load_campaign(path)
    store = RunStore(campaign.paths.store)
    tree = campaign.paths.tree

    def collected_not_judged(_: str) -> bool:  # its logs are in the store, the target not
        return any(r.state == "running" and r.files for r in store.runs())  # cleaned yet

    kill_when(path, tmp_path, "provisioning", lambda out: "Task run 'pre-flight" in out)
    assert not store.runs()  # killed before any run
    kill_when(path, tmp_path, "collection", collected_not_judged)
    kill_when(path, tmp_path, "assembly",
              lambda out: out.count("Finished in state Completed('h2/") == 2 or tree.exists())
    again = subprocess.run([str(SUBRUN), "run", str(path)], env=env(tmp_path), cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    done_exactly_once(store)
    assert len(store.keys()) == 2
    results = tree / "open" / "SubrunLab" / "results" / "h2" / "digits-mlp" / "SingleStream"
    assert (results / "accuracy" / "accuracy.txt").is_file()
    assert (results / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()
