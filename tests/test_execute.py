"""Runs on the lab's real hosts: executed in containers, judged, kept, never repeated.

Fault tests: the SSH link cut mid-run (the run completes on the target and is collected after
reconnecting, once), a killed container (recorded failed with its output tail), and an
audit.config left behind by a crash (never turns a later run into a compliance run).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bench import target as remote
from bench.campaign import Campaign
from bench.execute import ExecuteOptions, execute, reverify, run_files
from bench.loadgen_log import read_detail
from bench.plan import PlannedRun, make_plan
from bench.rules import load_rules
from bench.run import Check, RunKind, RunRecord, Scenario
from bench.store import RunStore
from bench.target import RunTarget, remote_run_dir
from lab.config import Inventory
from lab.docker import LABEL_CAMPAIGN
from lab.ssh import SshHost
from tests.conftest import lab_pid
from tests.support.sshd_sessions import serving
from tests.support.targets import OFFLINE_ABOVE_REACH_QPS, provisioned_target

pytestmark = pytest.mark.lab
RULES = load_rules("v6.1")


@pytest.fixture(scope="module")
def h2_target(lab_inventory: Inventory) -> RunTarget:
    return provisioned_target(lab_inventory, "h2")


def longer(run: PlannedRun, min_duration_ms: int) -> PlannedRun:
    """An Offline run of at least min_duration_ms (its target QPS is set above what the demo
    SUT reaches here, so LoadGen's sample count outlasts the duration: the run stays VALID)."""
    settings = {**run.spec.settings, "*.Offline.min_duration": min_duration_ms,
                "*.Offline.target_qps": OFFLINE_ABOVE_REACH_QPS}
    return PlannedRun(run.spec.model_copy(update={"settings": settings}), run.estimate_s)


def wait_for_container(target: RunTarget, store: RunStore, run: PlannedRun) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        record = store.latest(run.spec.key)
        if record is not None and remote.find(target, record) is not None:
            return
        time.sleep(0.3)
    raise AssertionError("the run's container never appeared")


def planned(target: RunTarget, scenario: Scenario, kind: RunKind, **settings: object) -> PlannedRun:
    campaign = Campaign.model_validate({"hosts": [{"host": target.config.name, "benchmarks": [
        {"benchmark": "digits", "scenarios": [scenario.value],
         "settings": {scenario.value: settings} if settings else {}}]}]})
    plan = make_plan(campaign, {"digits": target.manifest}, RULES)
    plan = plan.with_images({(target.config.name, "digits"): target.image_id}, "6.0.17")
    return next(r for r in plan.runs if r.spec.kind is kind)


def test_performance_run_is_judged_stored_and_never_repeated(h2_target: RunTarget,
                                                             tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    run = planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE)
    record = execute(h2_target, run, store, RULES)
    assert record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict
    assert not record.verdict.submittable  # short mode
    assert {"user.conf", "output/mlperf_log_detail.txt",
            "output/mlperf_log_summary.txt"} <= set(record.files)
    assert "audit.config" not in record.files
    assert store.verify(record.key, record.attempt) == []
    again = execute(h2_target, run, store, RULES)
    assert (again.attempt, again.files, again.finished_at) == (record.attempt, record.files,
                                                               record.finished_at)
    assert len(store.attempts(record.key)) == 1
    assert not h2_target.host.exists(remote_run_dir(h2_target, record.id.name(h2_target.campaign)))


def compliance_check(record: RunRecord) -> Check:
    assert record.verdict is not None, record.error
    return next(c for c in record.verdict.checks if c.name == "compliance")


@pytest.mark.serial  # TEST04 is held to +-10 % of its reference's measurement
def test_the_settle_time_counts_from_the_last_run_s_end_and_is_kept_whole(
        h2_target: RunTarget, tmp_path: Path) -> None:
    """Collecting, judging and handing over the host count towards its settle time: the next
    attempt waits only the rest, yet its container starts at least settle_s after the last one
    ended (the engine's own die and start events)."""
    settle_s = 2.0
    target = replace(h2_target, campaign=f"{h2_target.campaign}-settle",
                     config=h2_target.config.model_copy(update={"settle_s": settle_s}))
    store = RunStore(tmp_path / "store")
    began = time.time()
    records = [execute(target, planned(target, scenario, RunKind.ACCURACY), store, RULES)
               for scenario in (Scenario.OFFLINE, Scenario.SINGLE_STREAM)]
    assert all(r.verdict is not None and r.verdict.passed for r in records), records
    assert 0 < records[1].settle_s < settle_s  # the first attempt knew of no run before it
    events = target.engine.docker(
        ["events", "--since", str(int(began) - 1), "--until", str(int(time.time()) + 1),
         "--filter", f"label={LABEL_CAMPAIGN}={target.campaign}", "--format", "{{json .}}"],
        what="reading the test's container events").stdout.splitlines()
    times = {(json.loads(e)["Actor"]["Attributes"]["name"], json.loads(e)["Action"]):
             json.loads(e)["timeNano"] / 1e9 for e in events}
    first, second = (f"subrun-{r.id.name(target.campaign)}" for r in records)
    assert times[(second, "start")] - times[(first, "die")] >= settle_s


@pytest.mark.serial  # TEST04's Server run holds its latency bound only on h2's own core
def test_compliance_run_after_its_references(h2_target: RunTarget, tmp_path: Path) -> None:
    """TEST04 in the Server scenario, whose score is the rate LoadGen schedules queries at, so
    the loads decide the verdict: run at 0.97 x its reference's load it passes; its same logs
    verified against a reference at 600 QPS are over 10 % faster and fail. The reference asks
    for 1000 QPS; on a busy machine it may miss its latency bound and pass at the re-run's
    0.9 x, and TEST04 then follows the load that passed."""
    store = RunStore(tmp_path / "store")
    perf = execute(h2_target, planned(h2_target, Scenario.SERVER, RunKind.PERFORMANCE,
                                      target_qps=1000), store, RULES)
    assert perf.verdict is not None and perf.verdict.passed, perf.verdict or perf.error
    test04 = execute(h2_target, planned(h2_target, Scenario.SERVER, RunKind.TEST04,
                                        target_qps=1000),
                     store, RULES, references={RunKind.PERFORMANCE: perf})
    reference_qps = perf.spec.settings["*.Server.target_qps"]
    assert reference_qps == 1000 or (perf.attempt > 1 and reference_qps <= 900), perf.spec
    assert test04.state == "finished"
    assert test04.spec.settings["*.Server.target_qps"] == round(0.97 * reference_qps, 3)
    assert "audit.config" in test04.files and "verify_performance.txt" in test04.files
    folder = store.path(test04.key, test04.attempt)
    verification = (folder / "verify_performance.txt").read_text()
    assert "TEST PASS" in verification, verification
    assert compliance_check(test04).ok and test04.verdict and test04.verdict.passed
    assert read_detail(folder / "output" / "mlperf_log_detail.txt").audit_config_found
    slower = execute(h2_target, planned(h2_target, Scenario.SERVER, RunKind.PERFORMANCE,
                                        target_qps=600), store, RULES)
    assert slower.verdict is not None and slower.verdict.passed, slower.verdict or slower.error
    refused = reverify(store, test04, RULES, {RunKind.PERFORMANCE: slower})
    assert (refused.key, refused.reverifies) == (test04.key, test04.attempt)
    verification = (store.path(refused.key, refused.attempt)
                    / "verify_performance.txt").read_text()
    assert "TEST FAIL: Test score invalid" in verification, verification
    assert not compliance_check(refused).ok
    assert refused.verdict is not None and not refused.verdict.passed


def test_dropped_link_mid_run_is_collected_once_after_reconnect(
        lab_inventory: Inventory, h2_target: RunTarget, tmp_path: Path) -> None:
    host = SshHost(lab_inventory.host("h2"))
    target = RunTarget(host, h2_target.config, h2_target.manifest, h2_target.image,
                       h2_target.image_id)
    store = RunStore(tmp_path / "store")
    run = longer(planned(target, Scenario.OFFLINE, RunKind.PERFORMANCE), 3000)
    outcome: dict[str, BaseException] = {}

    def worker() -> None:
        try:
            execute(target, run, store, RULES)
        except BaseException as e:  # handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=worker)
    thread.start()
    wait_for_container(target, store, run)
    transport = host.connect()
    ours = serving(lab_pid("h2-sshd"), transport)
    assert ours, "the sshd process serving the run's link was not found"
    for proc in ours:
        os.kill(proc.pid, signal.SIGKILL)  # the server side of our link dies
    thread.join(timeout=120)
    assert "error" not in outcome, outcome  # the cut command was absorbed: reattached
    record = store.latest(run.spec.key)
    assert record is not None and record.state == "finished" and record.verdict
    assert record.verdict.passed
    assert len(store.attempts(run.spec.key)) == 1
    assert host.connect() is not transport  # it went through a new connection


def test_controller_crash_reattaches_to_the_running_container(h2_target: RunTarget,
                                                              tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    run = longer(planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE), 2000)
    record = store.start_attempt(run.spec)  # a controller started the run, then died
    remote.start(h2_target, record, run_files(run.spec, RULES))
    finished = execute(h2_target, run, store, RULES)
    assert finished.attempt == 1 and finished.state == "finished"
    assert finished.verdict is not None and finished.verdict.passed


def test_killed_container_is_recorded_failed_with_its_tail(h2_target: RunTarget,
                                                           tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    # Server: 30 s of queries arriving over time (an Offline run that long would issue ~26M)
    run = planned(h2_target, Scenario.SERVER, RunKind.PERFORMANCE, min_duration=30000)

    def killer() -> None:
        deadline = time.monotonic() + 60
        name = f"subrun-{h2_target.campaign}-{run.spec.key}-a1"
        while time.monotonic() < deadline:
            if h2_target.host.run(["docker", "kill", name], check=False).ok:
                return
            time.sleep(0.5)

    thread = threading.Thread(target=killer)
    thread.start()
    record = execute(h2_target, run, store, RULES, options=ExecuteOptions(max_reruns=0))
    thread.join()
    assert record.state == "failed"
    assert "exited with status 137" in record.error and "h2" in record.error
    assert record.verdict is None
    assert record.log_tail.strip()


def test_leftover_audit_config_never_reaches_a_performance_run(h2_target: RunTarget,
                                                               tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    # above what h2 reaches, so its first attempt is VALID however fast h2 is at the moment
    run = longer(planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE), 1000)
    stale = remote_run_dir(h2_target, f"{h2_target.campaign}-{run.spec.key}-a1")
    h2_target.host.makedirs(stale)
    h2_target.host.run(["sh", "-c", f"printf '*.*.mode = 2\\n' > {stale}/audit.config"])
    record = execute(h2_target, run, store, RULES)
    assert record.verdict is not None and record.verdict.passed and record.attempt == 1
    detail = read_detail(store.path(record.key, 1) / "output" / "mlperf_log_detail.txt")
    assert not detail.audit_config_found


def test_invalid_offline_run_is_rerun_with_the_proposed_qps(h2_target: RunTarget,
                                                            tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    run = planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE, target_qps=50)
    record = execute(h2_target, run, store, RULES, options=ExecuteOptions(max_reruns=1))
    attempts = store.attempts(run.spec.key)
    first = attempts[0]
    assert first.verdict is not None and not first.verdict.passed
    assert "INVALID" in first.verdict.reason and first.verdict.rerun_settings
    assert len(attempts) == 2 and record.attempt == 2 and record.key == run.spec.key
    assert record.spec.settings["*.Offline.target_qps"] > 50


def test_collected_but_unjudged_attempt_is_judged_not_rerun(h2_target: RunTarget,
                                                            tmp_path: Path) -> None:
    """The controller died after collecting and removing the container, before the verdict."""
    store = RunStore(tmp_path / "store")
    run = planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE)
    record = store.start_attempt(run.spec)
    handle = remote.start(h2_target, record, run_files(run.spec, RULES))
    assert not remote.wait(h2_target, handle, 120).running
    collected = tmp_path / "collected"
    remote.collect(h2_target, handle, collected)
    store.add_files(record.key, record.attempt, collected)
    remote.discard(h2_target, handle)
    final = execute(h2_target, run, store, RULES)
    assert final.attempt == 1 and final.state == "finished"
    assert final.verdict is not None and final.verdict.passed
    assert len(store.attempts(run.spec.key)) == 1


@pytest.mark.parametrize("output", ["", "mlperf_log_detail.txt"])
def test_an_attempt_killed_before_its_container_started_is_lost_and_leaves_nothing(
        h2_target: RunTarget, tmp_path: Path, output: str) -> None:
    """The controller died between writing the run directory and starting the container: the
    attempt is recorded lost, its directory removed (unless a run wrote output into it, which
    stays for a person to look at), and the run starts again as the next attempt."""
    store = RunStore(tmp_path / "store")
    run = longer(planned(h2_target, Scenario.OFFLINE, RunKind.PERFORMANCE), 1000)
    record = store.start_attempt(run.spec)
    run_dir = remote_run_dir(h2_target, record.id.name(h2_target.campaign))
    h2_target.host.run(["sh", "-c", 'mkdir -p "$1/output" && echo x > "$1/user.conf"'
                        + (f' && echo y > "$1/output/{output}"' if output else ""), "sh",
                        run_dir])
    final = execute(h2_target, run, store, RULES)
    lost, done = store.attempts(run.spec.key)
    assert lost.state == "lost" and not lost.files and "gone from the target" in lost.error
    assert done == final and final.attempt == 2 and final.verdict and final.verdict.passed
    assert h2_target.host.exists(run_dir) == bool(output)
    if output:
        h2_target.host.run(["rm", "-rf", run_dir])
