"""A training campaign of the demo benchmark on two lab hosts (two systems), in short mode:
the ruleset's run count each, the official package checker passes, and subrun's olympic score
equals result_summarizer's for each system. Then a second start repeats nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from bench.training_campaign import SEEDS_FILE
from bench.training_log import check_log

pytestmark = pytest.mark.lab


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
    from flows.states import summary_of
    from flows.training import training

    path = write_training_campaign(tmp_path, "train-lab", lab_dir / "hosts.yaml", ["h2", "h3"])
    summary = summary_of(training(campaign_file=str(path), return_state=True))
    assert summary["runs"] == 20 and summary["passed"] == 20, summary["failed"]
    assert summary["package_passed"], summary["package_errors"]
    org = Path(summary["package"])
    for host in ("h2", "h3"):
        results = org / "results" / host / "dlrm_dcnv2"
        assert len(list(results.glob("result_*.txt"))) == 10
        assert check_log(results / "result_0.txt", "6.0.0").valid
        key = f"{host}/dlrm_dcnv2"
        assert summary["official_scores"][key] == pytest.approx(summary["scores"][key],
                                                                rel=1e-9)
    campaign = load_campaign(path)
    store = RunStore(campaign.store_dir)
    seeds = json.loads((store.root / SEEDS_FILE).read_text())
    drawn = [s for per_host in seeds.values() for s in per_host["ctr-mini"]]
    recorded = [int(r.spec.settings["seed"]) for r in store.runs()]
    assert sorted(recorded) == sorted(drawn) and len(set(drawn)) == 20
    keys = store.keys()
    attempts = {k: len(store.attempts(k)) for k in keys}
    again = summary_of(training(campaign_file=str(path), return_state=True))
    assert again["passed"] == 20 and again["package_passed"]
    assert store.keys() == keys
    assert {k: len(store.attempts(k)) for k in keys} == attempts  # nothing repeated
