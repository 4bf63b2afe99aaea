"""A training campaign of the demo benchmark on two lab hosts (two systems), in short mode:
the ruleset's run count each, the official package checker passes, and subrun's olympic score
equals result_summarizer's for each system. Then a second start repeats nothing, and a start
killed while a run is in flight, started again, runs every seed once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from bench.training_campaign import SEEDS_FILE
from bench.training_log import check_log

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent


def write_training_campaign(tmp_path: Path, name: str, inventory: Path,
                            hosts: list[str]) -> Path:
    text = {"name": name, "kind": "training", "inventory": str(inventory), "division": "open",
            "mode": "short", "output_dir": str(tmp_path / "out"),
            "hosts": [{"host": h, "benchmarks": [{"benchmark": "ctr-mini"}]} for h in hosts]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(text))  # JSON is YAML
    return path


def test_a_training_campaign_on_two_systems(prefect_api: None, lab_dir: Path,
                                            tmp_path: Path) -> None:
    from flows.states import training_outcome_of
    from flows.submission import submission
    from flows.training import training

    path = write_training_campaign(tmp_path, "train-lab", lab_dir / "hosts.yaml", ["h2", "h3"])
    summary = training_outcome_of(training(campaign_file=str(path), return_state=True))
    assert summary.runs == 20 and summary.passed == 20, summary.failed
    assert summary.package_passed, summary.package_errors
    org = Path(summary.package)
    for host in ("h2", "h3"):
        results = org / "results" / host / "dlrm_dcnv2"
        assert len(list(results.glob("result_*.txt"))) == 10
        assert check_log(results / "result_0.txt", "6.0.0").valid
        key = f"{host}/dlrm_dcnv2"
        assert summary.official_scores[key] == pytest.approx(summary.scores[key],
                                                                rel=1e-9)
    campaign = load_campaign(path)
    store = RunStore(campaign.paths.store)
    seeds = json.loads((store.root / SEEDS_FILE).read_text())
    drawn = [s for per_host in seeds.values() for s in per_host["ctr-mini"]]
    recorded = [int(r.spec.settings["seed"]) for r in store.runs()]
    assert sorted(recorded) == sorted(drawn) and len(set(drawn)) == 20
    keys = store.keys()
    attempts = {k: len(store.attempts(k)) for k in keys}
    # started again through the submission flow (deployments run it): it hands the training
    # campaign to the training flow, which finds every run in the store
    again = training_outcome_of(submission(campaign_file=str(path), return_state=True))
    assert again.passed == 20 and again.package_passed
    assert store.keys() == keys
    assert {k: len(store.attempts(k)) for k in keys} == attempts  # nothing repeated


def test_killed_mid_run_and_started_again_runs_every_seed_once(lab_dir: Path,
                                                               tmp_path: Path) -> None:
    """`subrun run` SIGKILLed while a training run is in flight on h2, then started again: the
    run in flight is reattached, and every kept seed ends with exactly one finished run."""
    import uuid

    from tests.test_controller_kills import SUBRUN, env, kill_when

    name = f"train-kill-{uuid.uuid4().hex[:6]}"
    path = write_training_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"])
    store = RunStore(load_campaign(path).paths.store)

    def in_flight(_output: str) -> bool:  # the fourth run's attempt is open on h2
        return len(store.keys()) >= 4 and any(r.state == "running" for r in store.runs())

    kill_when(path, tmp_path, "the fourth run", in_flight)
    before = {r.spec.key: r.state for r in store.runs()}
    assert list(before.values()).count("running") == 1 and len(before) < 10
    done = subprocess.run([str(SUBRUN), "run", str(path)], env=env(tmp_path), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "package_checker: passed" in done.stdout
    assert "olympic score" in done.stdout and "result_summarizer" in done.stdout
    kept = json.loads((store.root / SEEDS_FILE).read_text())["h2"]["ctr-mini"]
    keys = store.keys()
    finished = [a for k in keys for a in store.attempts(k) if a.state == "finished"]
    assert sorted(int(a.spec.settings["seed"]) for a in finished) == sorted(kept)
    assert len(keys) == 10
    (tmp_path / "second-start.log").write_text(done.stdout)


def test_a_host_that_holds_two_training_runs_at_once_runs_them_side_by_side(
        prefect_api: None, lab_dir: Path, tmp_path: Path) -> None:
    """`training_runs_at_once: 2` on h2: its set holds the host, two runs at a time (never
    three), and every seed still runs once and passes."""
    import yaml

    from flows.states import training_outcome_of
    from flows.training import training

    inventory = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    next(h for h in inventory["hosts"] if h["name"] == "h2")["training_runs_at_once"] = 2
    hosts_yaml = tmp_path / "hosts.yaml"
    hosts_yaml.write_text(yaml.safe_dump(inventory, sort_keys=False))
    path = write_training_campaign(tmp_path, "train-two-at-once", hosts_yaml, ["h2"])
    outcome = training_outcome_of(training(campaign_file=str(path), return_state=True))
    assert outcome.runs == 10 and outcome.passed == 10, outcome.failed
    assert outcome.package_passed, outcome.package_errors
    records = RunStore(load_campaign(path).paths.store).runs()
    edges = sorted([(r.started_at, 1) for r in records] + [(r.finished_at, -1) for r in records],
                   key=lambda edge: (edge[0], edge[1]))  # an end before a start at one instant
    running, most = 0, 0
    for _, step in edges:
        running += step
        most = max(most, running)
    assert most == 2, most
