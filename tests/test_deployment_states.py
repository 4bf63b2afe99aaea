"""Deployment runs on a real local Prefect server with `subrun serve`: a campaign with a failing
run ends Failed naming it; a cancelled flow run stops its runs in flight (a container and a
native process) within 15 s, records them `cancelled`, and the next deployment run finishes the
campaign keeping every finished run; a cancelled training campaign stops its run in flight.
(Two campaigns taking turns on one host: test_deployment.)"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import requests
import yaml

from bench.campaign import load_campaign
from bench.run import RunRecord
from bench.store import RunStore
from lab.config import load_inventory
from lab.host import Host
from lab.transport import open_host
from tests.support.campaigns import write_campaign
from tests.support.containers import campaign_containers, containers_on
from tests.test_deployment import (  # noqa: F401 (server_env: the imported fixture)
    BIN,
    flow_run,
    server_env,
    stop_group,
    wait_for_deployment,
)

pytestmark = pytest.mark.lab
NATIVE = "h2-native"


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


def _runs_on(store: RunStore, host: str) -> list[RunRecord]:
    return [r for r in store.runs() if r.spec.host == host]


def _with_native_host(lab_dir: Path, folder: Path) -> Path:
    """The lab's inventory plus h2 as a host without Docker (`h2-native`): its native
    environment lives beside h2's work folder, so it is made once per lab, not per test."""
    data = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    h2 = next(h for h in data["hosts"] if h["name"] == "h2")
    docker = {**h2["docker"], "engine": False}
    pinned = {"cpuset": docker.pop("cpuset")} if "cpuset" in docker else {}  # h2's cores
    data["hosts"].append({**h2, "name": NATIVE, "work_dir": f"{h2['work_dir']}-native",
                          "docker": docker, "native": {"python": "/usr/bin/python3", **pinned}})
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _native_running(host: Host, store: RunStore, campaign: str) -> bool:
    """Whether the native process of the campaign's attempt on h2-native still runs."""
    records = [r for r in _runs_on(store, NATIVE) if r.state == "running"]
    if not records:
        return False
    record = records[0]
    found = host.find_detached(f"subrun-{campaign}-{record.key}-a{record.attempt}")
    return found is not None and host.poll_detached(found).running


def _scenario_run(store: RunStore, host: str, scenario: str) -> RunRecord | None:
    return next((r for r in _runs_on(store, host) if r.spec.scenario.value == scenario), None)


def _cancelling_at(env: dict[str, str], run_id: str) -> float:
    """When the API put the flow run in CANCELLING (the epoch seconds of that state): the
    cancel's start as the flow sees it, without the `prefect` CLI's own start-up."""
    reply = requests.get(f"{env['PREFECT_API_URL']}/flow_run_states/", timeout=30,
                         params={"flow_run_id": run_id})
    reply.raise_for_status()
    stamps = [s["timestamp"] for s in reply.json() if s["type"] == "CANCELLING"]
    assert stamps, reply.json()
    return datetime.fromisoformat(min(stamps).replace("Z", "+00:00")).timestamp()


# The run each host has in flight when the flow run is cancelled: h2 runs Offline (a second),
# then SingleStream for 20 s, whenever its SingleStream run is in flight its Offline run has
# finished whatever the machine's load (and a stream has no latency bound for a busy lab part
# to miss when it is resumed); the native run lasts until cancelled.
LONG = {"h2": ("SingleStream", 20000), NATIVE: ("Server", 600000)}


def test_cancelled_deployment_run_stops_its_runs_within_15_s_and_resumes(
        served: dict[str, str], lab_dir: Path, tmp_path: Path) -> None:
    name = "cancel-within-15s"  # container names are filtered by it: unique to this test
    hosts_yaml = _with_native_host(lab_dir, tmp_path)
    inventory = load_inventory(hosts_yaml)
    path = write_campaign(tmp_path, name, hosts_yaml, ["h2", NATIVE], accuracy=False)
    data = yaml.safe_load(path.read_text())
    for entry in data["hosts"]:
        scenario, duration_ms = LONG[entry["host"]]
        benchmark = entry["benchmarks"][0]
        benchmark["scenarios"] = ["Offline", scenario] if entry["host"] == "h2" else [scenario]
        benchmark["settings"][scenario] = {"min_duration": duration_ms}
        if scenario == "Server":
            benchmark["settings"][scenario]["target_qps"] = 500
    path.write_text(yaml.safe_dump(data))
    store = RunStore(load_campaign(path).paths.store)
    started = deployment_run(served, path, watch=False)
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = flow_run(served, started.stdout)["id"]

    def in_flight_runs() -> list[RunRecord]:
        return [r for h, (scenario, _) in LONG.items()
                if (r := _scenario_run(store, h, scenario))]

    h2, native = open_host(inventory.host("h2")), open_host(inventory.host(NATIVE))
    try:
        deadline = time.monotonic() + 600  # provisioning first; generous on a busy machine
        while not ((long := _scenario_run(store, "h2", LONG["h2"][0])) is not None
                   and long.state == "running" and campaign_containers(h2, name)
                   and _native_running(native, store, name)):
            assert time.monotonic() < deadline, "h2's long run and the native one never ran"
            time.sleep(1)
        offline = _scenario_run(store, "h2", "Offline")
        assert offline is not None and offline.state == "finished", offline
        subprocess.run([str(BIN / "prefect"), "flow-run", "cancel", run_id], env=served,
                       check=True, capture_output=True, timeout=120)
        cancelled_at = _cancelling_at(served, run_id)
        while campaign_containers(h2, name) or _native_running(native, store, name):
            assert time.time() - cancelled_at < 60, "runs still going a minute after cancel"
            time.sleep(0.5)
        stopped_s = time.time() - cancelled_at
    finally:
        h2.close()
        native.close()
    print(f"runs in flight stopped {stopped_s:.1f} s after the flow run was set CANCELLING")
    assert stopped_s <= 15, stopped_s

    deadline = time.monotonic() + 60
    while any(r.state != "cancelled" for r in in_flight_runs()):
        assert time.monotonic() < deadline, in_flight_runs()
        time.sleep(0.5)
    assert len(in_flight_runs()) == 2
    for cancelled in in_flight_runs():
        assert cancelled.verdict is None and "user.conf" in cancelled.files, cancelled
    assert _final_state(served, run_id) == "CANCELLED"
    status = subprocess.run([str(BIN / "subrun"), "status", str(path)], env=served,
                            capture_output=True, text=True, timeout=300, check=False)
    assert "cancelled" in status.stdout, status.stdout + status.stderr

    data["hosts"] = [h for h in data["hosts"] if h["host"] != NATIVE]  # its ten minutes
    path.write_text(yaml.safe_dump(data))
    again = deployment_run(served, path, watch=True)
    assert flow_run(served, again.stdout + again.stderr)["state"]["type"] == "COMPLETED", \
        again.stdout[-3000:]
    kept = _scenario_run(store, "h2", "Offline")
    assert kept is not None and kept.attempt == offline.attempt  # kept, not repeated
    resumed = _scenario_run(store, "h2", LONG["h2"][0])
    assert resumed is not None and resumed.attempt == 2 and resumed.state == "finished", resumed


def test_cancelled_training_deployment_run_stops_its_run_in_flight(
        served: dict[str, str], lab_dir: Path, tmp_path: Path) -> None:
    """A training campaign runs as a subflow of the deployment's flow run: cancelling that
    flow run stops the training run in flight (it lasts several seconds) from the flow's own
    process, records it, and starts no further run."""
    from tests.test_training_lab import write_training_campaign

    name = "train-cancelled"
    inventory = load_inventory(lab_dir / "hosts.yaml")
    path = write_training_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h3"])
    store = RunStore(load_campaign(path).paths.store)
    started = deployment_run(served, path, watch=False)
    assert started.returncode == 0, started.stdout + started.stderr
    run_id = flow_run(served, started.stdout)["id"]
    deadline = time.monotonic() + 600  # provisioning first
    while not (containers_on(inventory, "h3", name)
               and any(r.state == "running" for r in store.runs())):
        assert time.monotonic() < deadline, "no training run got going"
        time.sleep(0.2)
    cancelled_at = time.monotonic()  # what `prefect flow-run cancel` asks, without its start-up
    requests.post(f"{served['PREFECT_API_URL']}/flow_runs/{run_id}/set_state", timeout=30,
                  json={"state": {"type": "CANCELLING", "name": "Cancelling"}, "force": True}
                  ).raise_for_status()
    while any(r.state == "running" for r in store.runs()) or \
            containers_on(inventory, "h3", name):
        assert time.monotonic() - cancelled_at < 15, \
            [(r.spec.label, r.state) for r in store.runs()]
        time.sleep(0.5)
    assert _final_state(served, run_id) == "CANCELLED"
    ended = {r.spec.key: r.state for r in store.runs()}
    print(f"stopped {time.monotonic() - cancelled_at:.1f} s after the cancel: "
          f"{sorted(ended.values())}")
    assert set(ended.values()) <= {"finished", "cancelled"} and len(ended) < 10, ended
    assert "cancelled" in ended.values(), ended  # stopped, not left to end by itself
    time.sleep(5)  # nothing starts after the cancel
    assert {r.spec.key: r.state for r in store.runs()} == ended
    assert not containers_on(inventory, "h3", name)
    for record in (r for r in store.runs() if r.state == "cancelled"):
        assert record.verdict is None and record.files, record  # its logs collected


def _final_state(env: dict[str, str], run_id: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        reply = requests.get(f"{env['PREFECT_API_URL']}/flow_runs/{run_id}", timeout=30)
        state = str(reply.json()["state"]["type"])
        if state not in ("RUNNING", "CANCELLING") or time.monotonic() > deadline:
            return state
        time.sleep(0.5)
