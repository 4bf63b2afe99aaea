"""Deployment runs on a real local Prefect server with `subrun serve`: a campaign with a failing
run ends Failed naming it; a cancelled flow run leaves no container of its campaign running,
records the run in flight `cancelled`, and the next deployment run finishes the campaign keeping
every finished run."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from bench.campaign import load_campaign
from bench.run import RunRecord
from bench.store import RunStore
from lab.config import Inventory
from lab.transport import open_host
from tests.support.campaigns import write_campaign
from tests.test_deployment import BIN, server_env, stop_group, wait_for_deployment  # noqa: F401

pytestmark = pytest.mark.lab
UUID = re.compile(r"UUID:\s*([0-9a-f-]{36})")


@pytest.fixture(scope="module")
def served(server_env: dict[str, str],  # noqa: F811 (the imported fixture)
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    serve = subprocess.Popen([str(BIN / "subrun"), "serve"], env=server_env,
                             stdout=log.open("w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        wait_for_deployment(server_env["PREFECT_API_URL"], "submission/full")
        yield server_env
    finally:
        stop_group(serve)


def deployment_run(env: dict[str, str], campaign: Path, *, watch: bool
                   ) -> subprocess.CompletedProcess[str]:
    watching = ["--watch", "--watch-timeout", "900"] if watch else []
    return subprocess.run([str(BIN / "prefect"), "deployment", "run", "submission/full",
                           "--params", json.dumps({"campaign_file": str(campaign)}), *watching],
                          env=env, capture_output=True, text=True, timeout=1000, check=False)


def flow_run(env: dict[str, str], output: str) -> dict[str, Any]:
    found = UUID.search(output)
    assert found, output
    reply = requests.get(f"{env['PREFECT_API_URL']}/flow_runs/{found.group(1)}", timeout=30)
    reply.raise_for_status()
    return dict(reply.json())


def test_deployment_run_with_a_failing_run_ends_failed_naming_it(
        served: dict[str, str], lab_dir: Path, tmp_path: Path) -> None:
    path = write_campaign(tmp_path, "deployed-fails", lab_dir / "hosts.yaml", ["h3"],
                          accuracy=False)
    data = yaml.safe_load(path.read_text())
    data["max_reruns"] = 0
    data["hosts"][0]["benchmarks"][0]["settings"] = {"Offline": {"target_qps": 50}}  # INVALID
    path.write_text(yaml.safe_dump(data))
    done = deployment_run(served, path, watch=True)
    run = flow_run(served, done.stdout + done.stderr)
    assert run["state"]["type"] == "FAILED", run["state"]
    assert "h3/digits/Offline/performance" in run["state"]["message"]
    assert "INVALID" in run["state"]["message"]


def _campaign_containers(inventory: Inventory, host: str, campaign: str) -> list[str]:
    connection = open_host(inventory.host(host))
    try:
        found = connection.run(["docker", "ps", "--filter", f"name=subrun-{campaign}-",
                                "--format", "{{.Names}}"], timeout_s=60).stdout
    finally:
        connection.close()
    return found.split()


def _runs_on(store: RunStore, host: str) -> list[RunRecord]:
    return [r for r in store.runs() if r.spec.host == host]


def test_cancelled_deployment_run_stops_its_runs_and_resumes(
        served: dict[str, str], lab_dir: Path, lab_inventory: Inventory,
        tmp_path: Path) -> None:
    name = "cancelled"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2", "h3"], accuracy=False)
    data = yaml.safe_load(path.read_text())  # h2's run lasts a minute, h3's a few seconds
    data["hosts"][0]["benchmarks"][0]["settings"] = {
        "Offline": {"min_duration": 60000, "target_qps": 12000}}
    path.write_text(yaml.safe_dump(data))
    store = RunStore(load_campaign(path).store_dir)
    started = deployment_run(served, path, watch=False)
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = flow_run(served, started.stdout)["id"]

    deadline = time.monotonic() + 600  # provisioning first; generous on a busy machine
    while not (_campaign_containers(lab_inventory, "h2", name)
               and any(r.state == "finished" for r in _runs_on(store, "h3"))):
        assert time.monotonic() < deadline, "h2's run never got going while h3's finished"
        time.sleep(1)
    finished_h3 = _runs_on(store, "h3")[0]
    subprocess.run([str(BIN / "prefect"), "flow-run", "cancel", run_id], env=served,
                   check=True, capture_output=True, timeout=120)

    deadline = time.monotonic() + 180  # the issue asks 15 s; the bound here allows a slow CI
    while _campaign_containers(lab_inventory, "h2", name) or \
            _runs_on(store, "h2")[0].state != "cancelled":
        assert time.monotonic() < deadline, (_runs_on(store, "h2"),
                                             _campaign_containers(lab_inventory, "h2", name))
        time.sleep(1)
    cancelled = _runs_on(store, "h2")[0]
    assert cancelled.verdict is None and "user.conf" in cancelled.files
    status = subprocess.run([str(BIN / "subrun"), "status", str(path)], env=served,
                            capture_output=True, text=True, timeout=300, check=False)
    assert "cancelled" in status.stdout, status.stdout + status.stderr

    again = deployment_run(served, path, watch=True)
    assert flow_run(served, again.stdout + again.stderr)["state"]["type"] == "COMPLETED", \
        again.stdout[-3000:]
    assert _runs_on(store, "h3")[0].attempt == finished_h3.attempt  # kept, not repeated
    resumed = _runs_on(store, "h2")[0]
    assert resumed.attempt == cancelled.attempt + 1 and resumed.state == "finished"
