"""benchmark.yaml: the shipped manifests load, and a bad one is named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bench.manifest import PLACEHOLDERS, list_benchmarks, load_manifest
from bench.run import RUN_MOUNT, RunKind, Scenario
from lab.errors import ConfigError

GOOD = {
    "name": "toy",
    "open": {"model": "toy-net", "maps_to": "resnet"},
    "loadgen_model": "resnet50",
    "scenarios": ["Offline", "SingleStream"],
    "dataset_size": 50000,
    "performance_sample_count": 1024,
    "mounts": {"dataset_dir": "/subrun/data/toy"},
    "run": ["python", "-m", "toy", "--scenario", "{scenario}", "--mode", "{mode}",
            "--data", "{dataset_dir}", "--out", "{output_dir}"],
    "score": ["python", "-m", "toy.acc", "{output_dir}/mlperf_log_accuracy.json"],
    "assets": [{"name": "toy data", "location": "dataset_dir", "path": "toy.bin",
                "checksum": "sha256:" + "ab" * 32}],
    "defaults": {"Offline": {"target_qps": 100}},
}


def write(images: Path, data: dict, name: str = "toy") -> None:  # type: ignore[type-arg]
    (images / name).mkdir(parents=True, exist_ok=True)
    (images / name / "benchmark.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def error_of(images: Path, data: dict) -> str:  # type: ignore[type-arg]
    write(images, data)
    with pytest.raises(ConfigError) as caught:
        load_manifest("toy", images)
    return str(caught.value)


def test_shipped_benchmarks_load() -> None:
    assert {"digits", "resnet50"} <= set(list_benchmarks())
    digits = load_manifest("digits")
    assert digits.division == "open" and digits.official_model == "resnet"
    assert digits.model_mapping() == {"digits-mlp": "resnet"}
    assert digits.dataset_size == 50000 and digits.performance_sample_count == 1024
    assert set(digits.scenarios) == {Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM,
                                     Scenario.OFFLINE, Scenario.SERVER}
    resnet = load_manifest("resnet50")
    assert resnet.division == "closed" and resnet.tree_model == "resnet"
    assert resnet.model_mapping() == {}
    spec = resnet.image_spec()
    assert [s.name for s in spec.chain] == ["base", "resnet50"]
    assert spec.chain[0].base_image == "python:3.11-slim"


def test_argv_templates_render() -> None:
    digits = load_manifest("digits")
    argv = digits.run_argv(Scenario.SERVER, RunKind.ACCURACY)
    assert argv[argv.index("--scenario") + 1] == "Server"
    assert argv[argv.index("--mode") + 1] == "AccuracyOnly"
    assert argv[argv.index("--output-dir") + 1] == f"{RUN_MOUNT}/output"
    assert digits.run_argv(Scenario.OFFLINE, RunKind.TEST01)[6] == "PerformanceOnly"
    assert f"{RUN_MOUNT}/output/accuracy.txt" in digits.score_argv()
    resnet = load_manifest("resnet50")
    run = resnet.run_argv(Scenario.OFFLINE, RunKind.PERFORMANCE)
    assert "/subrun/data/imagenet" in run and "/subrun/models/resnet50" in run
    assert digits.user_conf_defaults(Scenario.SERVER) == {"target_qps": 1500.0,
                                                          "target_latency": 15.0}
    assert resnet.verify_argv() is not None and digits.verify_argv() is None


def test_scenario_not_served_is_refused() -> None:
    resnet = load_manifest("resnet50")
    with pytest.raises(ConfigError, match="does not serve Interactive"):
        resnet.run_argv(Scenario.INTERACTIVE, RunKind.PERFORMANCE)


def test_placeholders_are_the_documented_ones() -> None:
    assert PLACEHOLDERS == ("scenario", "mode", "run_dir", "user_conf", "output_dir",
                            "dataset_dir", "model_dir")


def test_good_manifest_loads(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    (tmp_path / "base").mkdir()
    manifest = load_manifest("toy", tmp_path)
    assert manifest.tree_model == "toy-net" and manifest.assets[0].algorithm == "sha256"
    assert manifest.image_spec(tmp_path).chain[0].name == "base"


@pytest.mark.parametrize(("change", "words"), [
    ({"scenaros": ["Offline"]}, "did you mean 'scenarios'"),
    ({"scenarios": ["Offline", "Ofline"]}, "scenarios[1]: Input should be"),
    ({"model": "resnet"}, "exactly one of `model:`"),
    ({"run": ["python", "{secnario}"]}, "{secnario}, which is not a placeholder"),
    ({"score": ["x", "{model_dir}/m"]}, "`mounts.model_dir` is not set"),
    ({"assets": [{"name": "a", "location": "dataset_dir", "path": "/abs",
                  "checksum": "md5:" + "0" * 32}]}, "must be relative"),
    ({"assets": [{"name": "a", "location": "image", "path": "rel",
                  "checksum": "md5:" + "0" * 32}]}, "must be absolute"),
    ({"assets": [{"name": "a", "location": "dataset_dir", "path": "a",
                  "checksum": "crc:1"}]}, "assets[0].checksum: Value error, a checksum is 'md5:"),
    ({"defaults": {"Server": {"target_qps": 5}}}, "defaults given for Server"),
    ({"defaults": {"Offline": {"target_qps": -5}}}, "defaults.Offline.target_qps"),
    ({"defaults": {"Offline": {"traget_qps": 5}}}, "did you mean 'target_qps'"),
    ({"run": []}, "run"),
    ({"build": {"parnet": "base"}}, "did you mean 'parent'"),
])
def test_bad_manifest_names_file_line_and_field(tmp_path: Path, change: dict,  # type: ignore[type-arg]
                                                words: str) -> None:
    message = error_of(tmp_path, {**GOOD, **change})
    assert str(tmp_path / "toy" / "benchmark.yaml") in message
    assert words in message
    assert "Traceback" not in message


def test_line_numbers_point_at_the_field(tmp_path: Path) -> None:
    message = error_of(tmp_path, {**GOOD, "performance_sample_count": "many"})
    line = yaml.safe_dump({**GOOD, "performance_sample_count": "many"}, sort_keys=False
                          ).splitlines().index("performance_sample_count: many") + 1
    assert f"benchmark.yaml:{line}: performance_sample_count" in message


def test_name_must_match_folder_and_unknown_benchmark_suggests(tmp_path: Path) -> None:
    write(tmp_path, {**GOOD, "name": "other"})
    with pytest.raises(ConfigError, match="must equal its folder name 'toy'"):
        load_manifest("toy", tmp_path)
    with pytest.raises(ConfigError, match="did you mean 'toy'"):
        load_manifest("tyo", tmp_path)


def test_missing_parent_folder_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path, {**GOOD, "build": {"parent": "nobase"}})
    manifest = load_manifest("toy", tmp_path)
    with pytest.raises(ConfigError, match=r"build\.parent 'nobase'"):
        manifest.image_spec(tmp_path)
