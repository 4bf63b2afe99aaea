"""Tuning on the lab: a campaign with `tune: auto` finds digits' Server target on h2 with short
probes, and its Server run of 60 s is VALID at the first attempt; `subrun tune` killed in the
middle of a probe and started again continues from the probes recorded, reattaches the probe
in flight, and repeats none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from bench.campaign import load_campaign
from bench.run import RunKind, RunRecord, RunState, Scenario
from bench.store import RunStore
from bench.tune_search import probed, tuned_key, verdicts
from bench.tuning_record import TuningBook, TuningRecord
from lab.config import Inventory
from lab.host import Host
from lab.transport import open_host
from tests.support.containers import campaign_containers
from tests.support.prefect_home import fresh_home

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent
MARGIN = 0.25  # the tuned run's: what it takes off the value the short probes found


def campaign_file(folder: Path, inventory: Path, name: str, **extra: object) -> Path:
    """digits Server on h2, short mode, tuned with short probes and a coarse resolution."""
    campaign = {"name": name, "inventory": str(inventory), "round": "v6.1", "division": "open",
                "mode": "short", "accuracy": False, "compliance": False,
                "output_dir": str(folder / "out"), "tune": "auto", "tune_probe_s": 5,
                "tune_resolution": 0.1, "tune_margin": 0.1, **extra,
                "hosts": [{"host": "h2", "benchmarks": [{"benchmark": "digits",
                                                         "scenarios": ["Server"]}]}]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return path


def server_record(path: Path) -> TuningRecord:
    records = TuningBook(load_campaign(path).paths.tuning).records()
    assert len(records) == 1 and records[0].scenario is Scenario.SERVER
    return records[0]


def tuning_attempts(store: RunStore) -> list[RunRecord]:
    """Every probe's attempt (a target probed again is a second attempt of one run key)."""
    keys = store.keys()
    return [a for k in keys for a in store.attempts(k) if a.spec.kind is RunKind.TUNING]


def assert_probed_again_only_while_undecided(record: TuningRecord) -> None:
    """No probe repeated by a restart: a value comes back only as the search's second opinion
    on a target still undecided (bench.tune_search.verdicts)."""
    for i, probe in enumerate(record.probes):
        value = probed(probe, Scenario.SERVER)
        again = [p for p in record.probes[:i]
                 if p.confirm == probe.confirm and probed(p, Scenario.SERVER) == value]
        assert not again or (not probe.confirm and value is not None and verdicts(
            Scenario.SERVER, record.probes[:i])[value] is None), (i, record.probes)


@pytest.mark.serial  # the probes and the 60-s run measure how many queries per second h2 holds
def test_a_tuned_server_run_of_60_s_is_valid_at_the_first_attempt(
        prefect_api: None, lab_dir: Path, tmp_path: Path, controller_off_h2: object) -> None:
    from flows.submission import submission

    # a margin of 25 %, the demo's: a 60-s Server run of this harness holds about a fifth less
    # than its 5-s probes pass (measured on one pinned core: a 5-s probe at 48,000 qps VALID,
    # 60-s runs at 38,400 VALID once and INVALID once, at 34,560 VALID), so a 20 % margin left
    # the run a coin toss at its knee; the 60-s confirmation takes more off when that is not
    # enough
    # (a resolution of 25 %: two bisections fewer; a coarser search only finds a lower VALID)
    path = campaign_file(tmp_path, lab_dir / "hosts.yaml", f"tuned-{uuid.uuid4().hex[:6]}",
                         tune_margin=MARGIN, tune_resolution=0.25)
    data = yaml.safe_load(path.read_text())
    data["hosts"][0]["benchmarks"][0]["settings"] = {"Server": {"min_duration": 60000}}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    outcome = submission(campaign_file=str(path))
    record = server_record(path)
    assert record.done and record.found and any(p.valid for p in record.probes)
    chosen = record.chosen[tuned_key(Scenario.SERVER)]
    assert probed(record.probes[-1], Scenario.SERVER) == chosen and record.probes[-1].valid
    flags = [p.confirm for p in record.probes]  # the search, then its confirmation(s)
    assert flags[-1] and flags == sorted(flags) and sum(flags) <= 3
    # the margin off what the search found, and at most once more for a failed confirmation:
    # a target that falls further is a search that misjudged the host
    found = record.found
    assert found is not None and chosen >= found * (1 - MARGIN) ** 2 * 0.999, (chosen, found)
    assert outcome.runs == 1 and outcome.passed == 1, outcome.failed
    store = RunStore(load_campaign(path).paths.store)
    runs = [r for r in store.runs() if r.spec.kind is RunKind.PERFORMANCE]
    assert len(runs) == 1 and runs[0].attempt == 1  # VALID at the first attempt
    assert runs[0].spec.settings[tuned_key(Scenario.SERVER)] == chosen
    assert runs[0].spec.settings["*.Server.min_duration"] == 60000
    probes = tuning_attempts(store)
    assert len(probes) == len(record.probes)  # each probe an attempt of the store, none lost
    length = {p.attempt: p.confirm for p in record.probes}
    for probe in probes:  # the search's probes last 5 s; the confirmations, the run's 60 s
        confirm = length[f"{probe.key}/attempt-{probe.attempt}"]
        assert probe.spec.settings["*.Server.min_duration"] == (60000 if confirm else 5000)
    assert "tuning" not in {p.name for p in Path(outcome.tree).rglob("*")}


def test_tuning_killed_in_a_probe_continues_from_the_recorded_probes(
        lab_dir: Path, lab_inventory: Inventory, tmp_path: Path) -> None:
    name = f"resume-{uuid.uuid4().hex[:6]}"
    path = campaign_file(tmp_path, lab_dir / "hosts.yaml", name, tune_resolution=0.25)
    campaign = load_campaign(path)
    book, store = TuningBook(campaign.paths.tuning), RunStore(campaign.paths.store)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(fresh_home(tmp_path / "prefect")), "COLUMNS": "200",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    command = [sys.executable, "-m", "flows", "tune", str(path)]

    def in_flight(h2: Host) -> bool:  # two probes recorded, the third one's container up on h2
        records = book.records()
        running = [r for r in store.runs() if r.state == RunState.RUNNING and not r.files]
        if not records or len(records[0].probes) < 2 or not running:
            return False
        # the record says running before the container starts: killed in between, the attempt
        # is rightly lost, not reattached
        suffix = f"-{running[0].key}-a{running[0].attempt}"
        return any(c.endswith(suffix) for c in campaign_containers(h2, name))

    log = tmp_path / "killed.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        h2 = open_host(lab_inventory.host("h2"))
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and proc.poll() is None and not in_flight(h2):
                time.sleep(0.1)
            assert proc.poll() is None, log.read_text()[-3000:]
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            h2.close()
    before = server_record(path)
    cut = [r for r in store.runs() if r.state == RunState.RUNNING]
    assert not before.done and len(cut) == 1
    again = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    after = server_record(path)
    assert after.done and after.probes[:len(before.probes)] == before.probes
    assert_probed_again_only_while_undecided(after)
    # the attempt in flight was reattached and finished, not started anew: every attempt of
    # the store is one recorded probe
    assert store.record(cut[0].key, cut[0].attempt).state == RunState.FINISHED
    attempts = [f"{a.key}/attempt-{a.attempt}" for a in tuning_attempts(store)]
    assert sorted(p.attempt for p in after.probes) == sorted(attempts)
    assert "h2" in again.stdout and "tuned" in again.stdout
