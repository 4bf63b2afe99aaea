"""`prefect deployment run submission/full` against a real local Prefect server and `subrun serve`,
on two lab hosts in short mode; the tree it leaves passes the prechecks, and the nightly
deployment carries the cron and time zone `subrun serve` was given; the flow run publishes its
progress, plan, run table and report as artifacts. The same deployments on a
work pool with two process workers: full and nightly campaigns sharing a host and its analyzer
take turns, and a waiting run names the flow run that holds the host."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bench.campaign import load_campaign
from bench.rules import load_rules
from bench.run import RunKind, RunRecord
from bench.store import RunStore
from lab.config import Inventory
from submission.precheck import precheck
from tests.support.campaigns import QUICK_POWER_SCENARIOS, write_campaign
from tests.support.official_power import free_port
from tests.support.power_inventory import stop_lab_daemon, with_analyzers
from tests.support.prefect_home import fresh_home

pytestmark = pytest.mark.lab
BIN = Path(sys.executable).parent
UUID = re.compile(r"UUID:\s*([0-9a-f-]{36})")


@pytest.fixture(scope="module")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = fresh_home(tmp_path_factory.mktemp("prefect-home"))
    env = {"PREFECT_HOME": str(home), "SUBRUN_HOME": str(home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_RUNNER_POLL_FREQUENCY": "2"}
    port = free_port()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        patch.delenv("PREFECT_API_URL", raising=False)
        from flows import server

        started = server.start(port, timeout_s=180)
        try:
            yield {**os.environ, **env, "PREFECT_API_URL": started.api_url}
        finally:
            assert server.stop(port)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process this test started, with its children (TERM, then KILL)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for_deployment(api_url: str, name: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if requests.get(f"{api_url}/deployments/name/{name}", timeout=5).ok:
            return
        time.sleep(1)
    raise AssertionError(f"deployment {name} never registered")


def nightly_schedules(env: dict[str, str]) -> list[tuple[str, str, bool]]:
    """The nightly deployment's schedules as the server holds them: (cron, time zone, active)."""
    reply = requests.get(f"{env['PREFECT_API_URL']}/deployments/name/submission/nightly",
                         timeout=30)
    reply.raise_for_status()
    return [(s["schedule"].get("cron"), s["schedule"].get("timezone"), s["active"])
            for s in reply.json()["schedules"]]


def artifacts(env: dict[str, str], run_id: str) -> dict[str, dict[str, Any]]:
    """The artifacts a flow run published, by key (each key is published once per run)."""
    reply = requests.post(f"{env['PREFECT_API_URL']}/artifacts/filter", timeout=30,
                          json={"artifacts": {"flow_run_id": {"any_": [run_id]}}})
    reply.raise_for_status()
    return {str(a["key"]): dict(a) for a in reply.json() if a.get("key")}


def flow_run(env: dict[str, str], output: str) -> dict[str, Any]:
    """The flow run whose id `prefect deployment run` printed."""
    found = UUID.search(output)
    assert found, output
    reply = requests.get(f"{env['PREFECT_API_URL']}/flow_runs/{found.group(1)}", timeout=30)
    reply.raise_for_status()
    return dict(reply.json())


def flow_run_logs(env: dict[str, str], run_id: str) -> list[str]:
    reply = requests.post(f"{env['PREFECT_API_URL']}/logs/filter", timeout=30,
                          json={"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})
    reply.raise_for_status()
    return [str(entry["message"]) for entry in reply.json()]


def test_deployment_run_full_on_two_hosts(server_env: dict[str, str], lab_dir: Path,
                                          tmp_path: Path) -> None:
    serve = subprocess.Popen([str(BIN / "subrun"), "serve", "--nightly-cron", "0 3 * * *",
                              "--timezone", "Europe/Berlin"], env=server_env,
                             stdout=(tmp_path / "serve.log").open("w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_deployment(server_env["PREFECT_API_URL"], "submission/full")
        for name in ("submission/nightly", "submission/edge"):
            wait_for_deployment(server_env["PREFECT_API_URL"], name)
        assert nightly_schedules(server_env) == [("0 3 * * *", "Europe/Berlin", True)]
        path = write_campaign(tmp_path, "deployed", lab_dir / "hosts.yaml", ["h2", "h3"])
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "submission/full", "--params",
             json.dumps({"campaign_file": str(path)}), "--watch", "--watch-timeout", "900"],
            env=server_env, capture_output=True, text=True, timeout=1000, check=False)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] + (
            tmp_path / "serve.log").read_text()[-5000:]
        made = artifacts(server_env, str(flow_run(server_env, run.stdout)["id"]))
    finally:
        stop_group(serve)
    campaign = load_campaign(path)
    report = precheck(campaign.paths.tree, load_rules(campaign.round))
    assert report.passed and report.results_checked == 2, [f.line() for f in report.findings]
    # what the flow run published on the server, as the UI shows it
    assert {"campaign-progress", "campaign-plan", "campaign-runs",
            "campaign-report"} <= set(made), sorted(made)
    assert made["campaign-progress"]["type"] == "progress"
    assert made["campaign-progress"]["data"] == 100.0  # every run counted
    rows = json.loads(made["campaign-runs"]["data"])
    assert len(rows) == 4 and {r["label"].split("/")[0] for r in rows} == {"h2", "h3"}, rows
    assert all(r["passed"] for r in rows), rows
    assert "h2" in made["campaign-plan"]["data"] and "h3" in made["campaign-plan"]["data"]
    assert "deployed" in made["campaign-report"]["data"]


def test_serve_without_a_server_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "empty-home")
    done = subprocess.run([str(BIN / "subrun"), "serve"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "prefect server start" in done.stderr and "Traceback" not in done.stderr


def test_two_workers_on_one_pool_share_a_host_and_its_analyzer_in_turns(
        server_env: dict[str, str], lab_dir: Path, lab_inventory: Inventory,
        tmp_path: Path) -> None:
    """Two process workers on one work pool, submission/full and submission/nightly on host h2
    and one analyzer, submitted at the same moment: whichever worker takes which flow run, the
    runs never overlap on the host, the power runs never overlap on the analyzer, a waiting run
    names the flow run holding the host, and both campaigns pass."""
    env = {**server_env, "PREFECT_WORKER_QUERY_SECONDS": "2"}
    subprocess.run([str(BIN / "prefect"), "work-pool", "create", "lab-pool", "--type",
                    "process"], env=env, check=True, capture_output=True, timeout=120)
    deployed = subprocess.run([str(BIN / "subrun"), "deploy", "--pool", "lab-pool"], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    analyzer = f"sim-pool-{uuid.uuid4().hex[:6]}"
    inventory = with_analyzers(lab_dir / "hosts.yaml", tmp_path, {"h2": analyzer},
                               extra=[{"name": analyzer, "model": "WT310E", "resource": "sim",
                                       "host": "local", "port": free_port()}])
    paths = {}
    for deployment in ("full", "nightly"):
        (tmp_path / deployment).mkdir()
        paths[deployment] = write_campaign(tmp_path / deployment, f"pool-{deployment}",
                                           inventory, ["h2"], accuracy=False, power=True,
                                           scenarios=QUICK_POWER_SCENARIOS)
    workers = [subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "lab-pool",
                                 "--type", "process", "--name", f"w{i}"], env=env,
                                stdout=(tmp_path / f"worker{i}.log").open("w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
               for i in (1, 2)]
    try:
        starts = {d: subprocess.Popen(
            [str(BIN / "prefect"), "deployment", "run", f"submission/{d}", "--params",
             json.dumps({"campaign_file": str(p)}), "--watch", "--watch-timeout", "600"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for d, p in paths.items()}  # the same moment
        ended = {d: p.communicate(timeout=700) for d, p in starts.items()}
        logs = "".join((tmp_path / f"worker{i}.log").read_text()[-3000:] for i in (1, 2))
        for d, p in starts.items():
            assert p.returncode == 0, (d, ended[d][0][-3000:], logs)
        runs = {d: flow_run(env, out) for d, (out, _) in ended.items()}
    finally:
        for worker in workers:
            stop_group(worker)
        stop_lab_daemon(lab_inventory, analyzer)
    records = [r for p in paths.values() for r in RunStore(load_campaign(p).paths.store).runs()]
    assert len(records) == 4 and all(r.verdict and r.verdict.passed for r in records), records
    assert_no_overlap(records)  # one run at a time on host h2
    assert_no_overlap([r for r in records if r.spec.kind is RunKind.POWER])  # and the analyzer
    assert {d: r["state"]["type"] for d, r in runs.items()} == \
        {"full": "COMPLETED", "nightly": "COMPLETED"}, runs
    waits = [line for r in runs.values() for line in flow_run_logs(env, r["id"])
             if "waiting: host:h2 is held by flow run '" in line]
    assert waits, "two campaigns started together on one host, and neither waited"
    other = {runs["full"]["id"]: runs["nightly"], runs["nightly"]["id"]: runs["full"]}
    for line in waits:  # each names the other campaign's flow run, by name and id
        assert any(f"'{r['name']}' ({r['id']})" in line for r in other.values()), line
    listed = subprocess.run([str(BIN / "prefect"), "global-concurrency-limit", "ls"],
                            env={**env, "COLUMNS": "250"}, capture_output=True, text=True,
                            timeout=120, check=True).stdout
    for limit in ("host:h2", f"analyzer:{analyzer}", "campaign:pool-full",
                  "campaign:pool-nightly"):
        assert limit in listed, listed


def assert_no_overlap(records: list[RunRecord]) -> None:
    """No two records' [start, end] intervals overlap."""
    intervals = sorted((r.started_at, r.finished_at, r.spec.label) for r in records)
    for (_, end, label), (start, _, other) in itertools.pairwise(intervals):
        assert end is not None and end <= start, (label, other, intervals)
