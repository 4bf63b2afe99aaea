"""Training campaigns without a lab: the campaign file, seeds kept across restarts, standings."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.campaign import Campaign
from bench.run import RunKind, Verdict
from bench.store import RunStore
from bench.training_campaign import SEEDS_FILE, plan_sets, standing
from bench.training_manifest import load_training_manifest
from lab.errors import ConfigError

MANIFESTS = {"ctr-mini": load_training_manifest("ctr-mini")}


def campaign(runs: int | None = None, **over: object) -> Campaign:
    bench: dict[str, object] = {"benchmark": "ctr-mini"}
    if runs is not None:
        bench["runs"] = runs
    return Campaign.model_validate({"name": "t", "kind": "training", "hosts": [
        {"host": "h2", "benchmarks": [bench]}, {"host": "h3", "benchmarks": [bench]}], **over})


def test_a_training_campaign_file_is_checked_for_its_kind() -> None:
    with pytest.raises(ValueError, match="no scenarios or LoadGen settings"):
        Campaign.model_validate({"kind": "training", "hosts": [
            {"host": "h2", "benchmarks": [{"benchmark": "ctr-mini", "scenarios": ["Offline"]}]}]})
    with pytest.raises(ValueError, match="`runs:` is for training campaigns"):
        Campaign.model_validate({"hosts": [
            {"host": "h2", "benchmarks": [{"benchmark": "digits", "runs": 3}]}]})


def test_seeds_are_distinct_kept_and_reused_on_restart(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    sets = plan_sets(campaign(), MANIFESTS, "Acme", {}, store)
    assert [len(s.runs) for s in sets] == [10, 10]  # dlrm_dcnv2 in ruleset 6.0.0
    seeds = [int(r.spec.settings["seed"]) for s in sets for r in s.runs]
    assert len(set(seeds)) == 20
    kept = json.loads((store.root / SEEDS_FILE).read_text())
    assert kept["h2"]["ctr-mini"] == seeds[:10]
    again = plan_sets(campaign(), MANIFESTS, "Acme", {}, store)
    assert [r.spec.key for s in again for r in s.runs] == [r.spec.key for s in sets
                                                          for r in s.runs]
    more = plan_sets(campaign(runs=12), MANIFESTS, "Acme", {}, store)  # M > N adds two seeds
    assert [int(r.spec.settings["seed"]) for r in more[0].runs][:10] == seeds[:10]
    assert len({int(r.spec.settings["seed"]) for s in more for r in s.runs}) == 24
    run = sets[0].runs[3]
    assert run.label == "h2/ctr-mini/run03" and run.spec.kind is RunKind.TRAINING
    assert run.spec.round == "6.0.0" and run.spec.model == "dlrm_dcnv2"


def test_fewer_runs_than_the_ruleset_asks_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs 10 runs of dlrm_dcnv2"):
        plan_sets(campaign(runs=5), MANIFESTS, "Acme", {}, RunStore(tmp_path))


def test_the_standing_scores_as_runs_land(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    sets = plan_sets(campaign(runs=11), MANIFESTS, "Acme", {}, store)
    h2 = sets[0]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    minutes = [0.05, 0.04, None, 0.06, 0.03, 0.07, 0.05, 0.04, 0.06, 0.05, 0.08]  # None: failed
    for i, planned in enumerate(h2.runs):
        record = store.start_attempt(planned.spec, started_at=t0 + timedelta(minutes=i))
        ok = minutes[i] is not None
        verdict = Verdict(passed=ok, metrics={"time_to_train_min": minutes[i]} if ok else {})
        store.update(record.key, record.attempt, state="finished", verdict=verdict)
        if i == 3:
            early = standing(h2, store)
            assert (early.done, early.converged, early.selection) == (4, 3, None)
            # 0.05 0.04 fail 0.06: drop 0.04 and the failed run -> (0.05 + 0.06) / 2
            assert early.provisional_min == pytest.approx(0.055)
    final = standing(h2, store)
    assert final.selection is not None and final.selection.valid
    # windows of 10 over 11 runs; each drops 0.03 and the failed run
    w0 = (0.05 + 0.04 + 0.06 + 0.07 + 0.05 + 0.04 + 0.06 + 0.05) / 8  # runs 0-9: 0.0525
    w1 = (0.04 + 0.06 + 0.07 + 0.05 + 0.04 + 0.06 + 0.05 + 0.08) / 8  # runs 1-10: 0.05625
    assert final.selection.window_scores == pytest.approx((w0, w1))
    assert final.selection.score == pytest.approx(w1)  # two windows: the slower middle one
    assert final.selection.runs[0].run_id == "h2/ctr-mini/run01"
    assert "olympic score" in final.describe()


def test_plan_and_status_of_a_training_campaign(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    path = tmp_path / "t.yaml"
    root = Path(__file__).resolve().parents[1]
    path.write_text((root / "campaigns/training.yaml").read_text()
                    + f"inventory: {root / 'hosts.yaml'}\noutput_dir: {tmp_path / 'out'}\n")
    plan = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert plan.exit_code == 0, plan.output
    assert "local/ctr-mini: 10 runs as dlrm_dcnv2" in plan.output
    assert "(ruleset 6.0.0 asks 10)" in plan.output
    assert "local/ctr-mini/run09" in plan.output and "(not submittable)" in plan.output
    status = CliRunner().invoke(app, ["status", str(path)], env={"COLUMNS": "200"})
    assert status.exit_code == 0, status.output
    assert status.output.count("pending") == 10
    assert "0/10 runs, 0 converged" in status.output
