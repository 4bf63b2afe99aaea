"""Rules per round: every round file loads strictly, lookups answer what checker.md says, and a
bad file or name is a clear ConfigError."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import rules as rules_module
from bench.loadgen_build import LoadgenBuild, probe_loadgen, require_loadgen_round
from bench.rules import RoundRules, available_rounds, load_rules, round_of_seeds
from bench.run import RunKind, Scenario
from lab.errors import ConfigError
from lab.yamlfile import load_model

ROUNDS = ["v5.0", "v5.1", "v6.0", "v6.1"]


def test_every_round_has_a_valid_file() -> None:
    assert available_rounds() == ROUNDS
    for name in ROUNDS:
        rules = load_rules(name)
        assert rules.round == name == rules.checker_version
        assert rules.min_duration_ms == 600000
    assert [load_rules(n).layout for n in ROUNDS] == ["v5", "v5", "v6", "v6"]


def test_seeds_per_round_match_checker_reference() -> None:
    assert load_rules("v6.1").seeds.qsl_rng_seed == 2085463073848966840
    assert load_rules("v6.0").seeds.schedule_rng_seed == 3936089224930324775
    assert load_rules("v5.1").seeds.sample_index_rng_seed == 14771362308971278857
    assert load_rules("v5.0").seeds.qsl_rng_seed == 6023615788873153749
    assert len({load_rules(n).seeds for n in ROUNDS}) == 4
    assert round_of_seeds(load_rules("v6.0").seeds) == "v6.0"


def test_models_aliases_and_scenarios_v61() -> None:
    rules = load_rules("v6.1")
    assert rules.resolve("resnet50") == "resnet"
    assert rules.resolve("llama3_1-8b") == "llama3.1-8b"
    assert "llama2-70b-99" not in rules.models and "retinanet" not in rules.models
    edge = rules.scenarios("resnet", "edge")
    assert edge is not None and edge.required == (
        Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.OFFLINE)
    dc = rules.scenarios("resnet", "datacenter")
    assert dc is not None and dc.allowed == frozenset()  # not listed: would crash the checker
    llm = rules.scenarios("llama3.1-8b", "datacenter")
    assert llm is not None and llm.one_of == (Scenario.INTERACTIVE, Scenario.SERVER)
    assert rules.model("resnet").compliance == (RunKind.TEST01, RunKind.TEST04)
    assert rules.model("gpt-oss-120b").compliance == (RunKind.TEST07, RunKind.TEST09)
    assert not any(RunKind.TEST05 in (m.compliance or ()) for m in rules.models.values())


def test_accuracy_targets_and_counts_v61() -> None:
    rules = load_rules("v6.1")
    (acc,) = rules.accuracy_targets("resnet", Scenario.OFFLINE) or ()
    assert acc.lower == pytest.approx(75.6954) and acc.upper is None
    gen_len = next(t for t in rules.accuracy_targets("llama3.1-8b", Scenario.OFFLINE) or ()
                   if t.metric == "GEN_LEN")
    assert gen_len.lower == pytest.approx(8167644 * 0.9)
    assert gen_len.upper == pytest.approx(8167644 * 1.1)
    (q3,) = rules.accuracy_targets("qwen3-vl-235b-a22b", Scenario.INTERACTIVE) or ()
    assert q3.lower == pytest.approx(0.7878 * 0.99)
    assert rules.accuracy_sample_count("qwen3-vl-235b-a22b", Scenario.INTERACTIVE) == 8000
    assert rules.accuracy_sample_count("qwen3-vl-235b-a22b", Scenario.OFFLINE) == 48289
    assert rules.accuracy_sample_count("resnet", Scenario.OFFLINE) == 50000
    assert rules.model("resnet").latency_constraint_ns[Scenario.SERVER] == 15_000_000
    assert rules.model("qwen3.6-27b").offline_min_samples_per_query is None
    assert rules.delta_pct("bert-99.9", "F1") == 0.1
    assert rules.delta_pct("resnet", "acc") == 1.0


@pytest.mark.parametrize(("metric", "line", "value"), [
    ("acc", "accuracy=76.456%, good=38228, total=50000", 76.456),
    ("acc", '{"accuracy": 0.7301, "n": 10}', 0.7301),
    ("mAP", "mAP=53.1", 53.1),
    ("F1", '{"exact_match": 83.5, "f1": 90.9}', 90.9),
    ("DICE", "Accuracy: mean = 0.86, kidney = 0.93", 0.86),
    ("ACCURACY", "Word Error Rate: 2.1%, accuracy=97.9%", 97.9),
    ("ROUGE1", "{'rouge1': 44.4, 'rouge2': 22.0}", 44.4),
    ("GEN_LEN", "{'gen_len': 8000000, 'x': 1}", 8000000),
    ("DLRM_NE", "metric/lifetime_ne/rating: 0.867", 0.867),
    ("E2E_ACCURACY", "Accuracy: 34.2", 34.2),
])
def test_accuracy_patterns_read_reference_lines(metric: str, line: str, value: float) -> None:
    match = re.match(load_rules("v6.1").accuracy_patterns[metric], line)
    assert match and float(match.group(1)) == value


def test_older_rounds_leave_unknown_values_out() -> None:
    v51, v50 = load_rules("v5.1"), load_rules("v5.0")
    assert v51.accuracy_targets("resnet", Scenario.OFFLINE) is None
    assert v51.model("resnet").performance_sample_count is None
    assert v51.scenarios("bert-99", "edge") is None  # not known, unlike "not listed"
    assert v51.model("llama3.1-8b-edge").compliance is None
    assert v51.model("resnet").offline_min_samples_per_query == 24576
    assert v50.models == {} and not v50.models_known
    assert v50.resolve("anything") == "anything"
    assert v50.model("anything").accuracy is None
    qwen_v60 = load_rules("v6.0").scenarios("qwen3-vl-235b-a22b", "datacenter")
    assert qwen_v60 is not None and qwen_v60.required == (Scenario.SERVER, Scenario.OFFLINE)


def test_audit_lines_merge_shared_and_model_lines() -> None:
    rules = load_rules("v6.1")
    test01 = rules.audit_lines(RunKind.TEST01, "resnet50")
    assert test01 == {"*.*.mode": 2, "*.*.accuracy_log_rng_seed": 720381539243781796,
                      "*.*.accuracy_log_sampling_target": 4096}
    test04 = rules.audit_lines(RunKind.TEST04, "stable-diffusion-xl")
    assert test04["*.Server.performance_issue_same_index"] == 3
    assert test04["stable-diffusion-xl.Offline.min_query_count"] == 500
    with pytest.raises(ConfigError, match=r"no audit\.config for TEST08"):
        rules.audit_lines(RunKind.TEST08, "resnet")


def test_unknown_names_get_suggestions() -> None:
    with pytest.raises(ConfigError, match=r"Did you mean 'v6\.1'"):
        load_rules("v6.2")
    with pytest.raises(ConfigError, match="Did you mean 'resnet'"):
        load_rules("v6.1").resolve("resnt")


def test_bad_round_file_is_reported_with_line(tmp_path: Path) -> None:
    text = (rules_module.ROUNDS_DIR / "v6.1.yaml").read_text()
    bad = tmp_path / "v6.1.yaml"
    bad.write_text(text.replace("    dataset_size: 50000",
                                "    dataset_size: 50000\n    min_durration: 1"))
    with pytest.raises(ConfigError, match=r"v6.1.yaml:\d+: models.resnet.min_durration: "
                                          "unknown key; did you mean 'min_duration_exempt'"):
        load_model(bad, RoundRules)
    bad.write_text(text.replace("- {metric: acc, reference: 76.46", "- {metric: accc, "
                                "reference: 76.46").replace("accuracy: [{metric: acc, ref",
                                                            "accuracy: [{metric: accc, ref"))
    with pytest.raises(ConfigError, match="metric accc has no pattern"):
        load_model(bad, RoundRules)


def test_installed_loadgen_is_for_v61_and_other_rounds_are_refused() -> None:
    build = probe_loadgen()
    assert isinstance(build, LoadgenBuild) and build.version.startswith("6.0.17")
    assert build.round == "v6.1"
    assert require_loadgen_round("v6.1") == build
    with pytest.raises(ConfigError, match=r"logs the seeds of v6.1 .* round is v6.0"):
        require_loadgen_round("v6.0")
