"""`prefect deployment run submission/full` against a real local Prefect server and `subrun serve`,
on two lab hosts in short mode; the tree it leaves passes the prechecks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bench.campaign import load_campaign
from bench.rules import load_rules
from submission.precheck import precheck
from tests.support.campaigns import write_campaign
from tests.support.official_power import free_port

pytestmark = pytest.mark.lab
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("prefect-home")
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


def test_deployment_run_full_on_two_hosts(server_env: dict[str, str], lab_dir: Path,
                                          tmp_path: Path) -> None:
    serve = subprocess.Popen([str(BIN / "subrun"), "serve"], env=server_env,
                             stdout=(tmp_path / "serve.log").open("w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_deployment(server_env["PREFECT_API_URL"], "submission/full")
        for name in ("submission/nightly", "submission/edge"):
            wait_for_deployment(server_env["PREFECT_API_URL"], name)
        path = write_campaign(tmp_path, "deployed", lab_dir / "hosts.yaml", ["h2", "h3"])
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "submission/full", "--params",
             json.dumps({"campaign_file": str(path)}), "--watch", "--watch-timeout", "900"],
            env=server_env, capture_output=True, text=True, timeout=1000, check=False)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] + (
            tmp_path / "serve.log").read_text()[-5000:]
    finally:
        stop_group(serve)
    campaign = load_campaign(path)
    report = precheck(campaign.tree_dir, load_rules(campaign.round))
    assert report.passed and report.results_checked == 2, [f.line() for f in report.findings]


def test_serve_without_a_server_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "empty-home")
    done = subprocess.run([str(BIN / "subrun"), "serve"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "prefect server start" in done.stderr and "Traceback" not in done.stderr


def test_same_deployments_on_a_work_pool_with_one_worker(server_env: dict[str, str],
                                                         lab_dir: Path, tmp_path: Path) -> None:
    env = {**server_env, "PREFECT_WORKER_QUERY_SECONDS": "2"}
    subprocess.run([str(BIN / "prefect"), "work-pool", "create", "lab-pool", "--type",
                    "process"], env=env, check=True, capture_output=True, timeout=120)
    deployed = subprocess.run([str(BIN / "subrun"), "deploy", "--pool", "lab-pool"], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "lab-pool",
                               "--type", "process"], env=env,
                              stdout=(tmp_path / "worker.log").open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        path = write_campaign(tmp_path, "pooled", lab_dir / "hosts.yaml", ["h2"],
                              accuracy=False)
        run = subprocess.run(
            [str(BIN / "prefect"), "deployment", "run", "submission/full", "--params",
             json.dumps({"campaign_file": str(path)}), "--watch", "--watch-timeout", "600"],
            env=env, capture_output=True, text=True, timeout=700, check=False)
        assert run.returncode == 0, run.stdout[-3000:] + (tmp_path / "worker.log").read_text()[
            -5000:]
    finally:
        stop_group(worker)
    store_runs = list((load_campaign(path).store_dir).glob("*/attempt-1/run.json"))
    assert len(store_runs) == 1
