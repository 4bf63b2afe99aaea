"""The training benchmark contract and the demo benchmark's log under the official checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.manifest import load_manifest
from bench.training_log import check_log, read_facts
from bench.training_manifest import TrainingManifest, is_training, load_training_manifest
from lab.errors import ConfigError
from testkit.training import train

BASE = {"name": "x", "kind": "training", "open": {"model": "m", "maps_to": "dlrm_dcnv2"},
        "ruleset": "6.0.0", "run": ["train", "--seed", "{seed}"],
        "quality": {"target": 0.8}, "global_batch_size": 64}


def test_the_demo_manifest_loads_as_training() -> None:
    manifest = load_training_manifest("ctr-mini")
    assert is_training("ctr-mini") and not is_training("digits")
    assert (manifest.official_model, manifest.division, manifest.ruleset) == (
        "dlrm_dcnv2", "open", "6.0.0")
    argv = manifest.train_argv(seed=42, submitter="Acme", system="h2", division="open")
    assert argv[argv.index("--seed") + 1] == "42"
    assert argv[argv.index("--benchmark") + 1] == "dlrm_dcnv2"
    with pytest.raises(ConfigError, match="kind"):
        load_manifest("ctr-mini")  # an inference campaign cannot take it


@pytest.mark.parametrize(("change", "words"), [
    ({"run": ["train"]}, "must pass the run's seed"),
    ({"run": ["train", "{seed}", "{scenario}"]}, "{scenario}, which is not a placeholder"),
    ({"benchmark": "dlrm_dcnv2"}, "exactly one of"),
    ({"ruleset": "6.0"}, "ruleset"),
])
def test_bad_training_manifests_are_refused(change: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("{", r"\{").replace("}", r"\}")):
        TrainingManifest.model_validate({**BASE, **change})


@pytest.mark.slow
def test_a_demo_run_passes_the_official_compliance_checker(tmp_path: Path) -> None:
    log = train(tmp_path / "a", seed=1234)
    check = check_log(log, "6.0.0")
    assert check.valid, check.messages
    facts = read_facts(log, "6.0.0")
    assert facts.status == "success" and facts.seeds == [1234]
    assert facts.accuracy is not None and facts.accuracy >= 0.872
    assert facts.epochs is not None and 1 <= facts.epochs <= 12
    assert facts.time_to_train_min is not None and 0 < facts.time_to_train_min < 1
    assert (facts.benchmark, facts.global_batch_size) == ("dlrm_dcnv2", 512)


@pytest.mark.slow
def test_an_unreachable_target_aborts_and_a_cut_log_fails_the_checker(tmp_path: Path) -> None:
    log = train(tmp_path / "b", seed=5, target=0.99, epochs=2)
    assert read_facts(log, "6.0.0").status == "aborted"
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(line for line in log.read_text().splitlines(keepends=True)
                           if '"run_stop"' not in line))
    check = check_log(cut, "6.0.0")
    assert not check.valid and any("run_stop" in m for m in check.messages)
    assert not check_log(tmp_path / "none.txt", "6.0.0").valid


@pytest.mark.slow
def test_the_verdict_names_a_run_that_did_not_converge_and_a_wrong_seed(tmp_path: Path) -> None:
    from bench.run import Mode, RunKind, RunSpec, Scenario
    from bench.training_verdict import judge_training

    def spec(seed: int, target: float) -> RunSpec:
        return RunSpec(host="h2", benchmark="ctr-mini", model="dlrm_dcnv2",
                       scenario=Scenario.OFFLINE, kind=RunKind.TRAINING, mode=Mode.SHORT,
                       round="6.0.0", settings={"run": 0, "seed": seed, "quality_target": target,
                                                "log_file": "result.txt"})

    train(tmp_path / "a" / "output", seed=77, target=0.99, epochs=2)
    stuck = judge_training(spec(77, 0.99), tmp_path / "a")
    assert not stuck.passed and not stuck.submittable
    assert "converged: run_stop aborted after 2 epochs" in stuck.reason
    assert "against the target 0.99" in stuck.reason and "infinitely slow" in stuck.fix
    assert stuck.metrics["epochs"] == 2 and stuck.metrics["seed"] == 77
    train(tmp_path / "b" / "output", seed=78)
    good = judge_training(spec(78, 0.872), tmp_path / "b")
    assert good.passed and good.metrics["time_to_train_min"] > 0
    assert not good.submittable  # short mode
    wrong = judge_training(spec(79, 0.872), tmp_path / "b")
    assert not wrong.passed and "seed: logged seeds [78], drawn 79" in wrong.reason
