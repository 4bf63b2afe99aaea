"""LoadGen log parsing, on logs the real LoadGen wrote (and on damaged copies of them)."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest

from bench.loadgen_log import (
    iter_accuracy_log,
    locate_logs,
    parse_detail,
    read_detail,
    read_summary,
)
from bench.power_samples import format_time, parse_time
from bench.rules import load_rules
from lab.errors import RunError
from testkit.loadgen_run import TinySut, run_loadgen

OFFLINE = ("*.Offline.min_duration = 300\n*.Offline.min_query_count = 1\n"
           "*.Offline.target_qps = 6000\n")
SINGLE = ("*.SingleStream.min_duration = 300\n*.SingleStream.min_query_count = 64\n"
          "*.SingleStream.target_latency = 0.3\n")
TEST01 = ("*.*.mode = 2\n*.*.accuracy_log_rng_seed = 720381539243781796\n"
          "*.*.accuracy_log_sampling_target = 4096\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("logs")
    sut = TinySut(sample_time_us=250)
    return {
        "offline": run_loadgen(root / "offline", scenario="Offline", user_conf=OFFLINE, sut=sut),
        "single": run_loadgen(root / "single", scenario="SingleStream", user_conf=SINGLE, sut=sut),
        "twice": run_loadgen(root / "twice", scenario="Offline", user_conf=OFFLINE, sut=sut,
                             user_conf_loads=2),
        "test01": run_loadgen(root / "test01", scenario="Offline", user_conf=OFFLINE, sut=sut,
                              audit_config=TEST01),
        "accuracy": run_loadgen(root / "accuracy", scenario="Offline", user_conf=OFFLINE,
                                mode="accuracy"),
    }


def test_detail_log_values_settings_and_results(runs: dict[str, Path]) -> None:
    log = read_detail(runs["offline"] / "mlperf_log_detail.txt")
    assert log.scenario == "Offline" and log.test_mode == "PerformanceOnly"
    assert log.valid and log.get("result_validity") == "VALID"
    assert log.seeds == load_rules("v6.1").seeds == log.requested_seeds
    assert log.effective["min_duration_ms"] == 300
    assert log.requested["offline_expected_qps"] == 6000
    assert log.results["samples_per_second"] > 0
    assert log.results["early_stopping_met"] is True
    assert log.loadgen_version.startswith("6.0.17")
    assert not log.errors and not log.audit_config_found and log.unparsed_lines == 0
    assert log.power_begin is not None and log.power_end is not None
    assert log.power_begin <= log.power_end


def test_first_entry_per_key_wins_like_the_checker(runs: dict[str, Path]) -> None:
    text = (runs["offline"] / "mlperf_log_detail.txt").read_text()
    extra = {"key": "result_validity", "value": "INVALID", "metadata": {"is_error": False}}
    log = parse_detail(text + ":::MLLOG " + json.dumps(extra) + "\n")
    assert log.get("result_validity") == "VALID"
    assert [e.value for e in log.entries if e.key == "result_validity"] == ["VALID", "INVALID"]


def test_errors_and_warnings_carry_is_error(runs: dict[str, Path]) -> None:
    log = read_detail(runs["twice"] / "mlperf_log_detail.txt")
    assert [e.key for e in log.errors] == ["error_invalid_config"]
    assert "Multiple conf files" in str(log.errors[0].value)
    assert all(not e.is_error for e in log.warnings)
    assert read_summary(runs["twice"] / "mlperf_log_summary.txt").error_count == 1


def test_audit_config_evidence(runs: dict[str, Path]) -> None:
    log = read_detail(runs["test01"] / "mlperf_log_detail.txt")
    assert log.audit_config_found and not log.test05_applied
    assert log.effective["accuracy_log_sampling_target"] == 4096
    assert log.effective["accuracy_log_rng_seed"] == 720381539243781796


def test_summary_scores_match_the_detail_log(runs: dict[str, Path]) -> None:
    offline = read_summary(runs["offline"] / "mlperf_log_summary.txt")
    detail = read_detail(runs["offline"] / "mlperf_log_detail.txt")
    assert offline.scenario == "Offline" and offline.valid
    assert offline.score() == pytest.approx(detail.get("result_samples_per_second"))
    single = read_summary(runs["single"] / "mlperf_log_summary.txt")
    estimate = float(single.fields["Early stopping 90.0th percentile estimate"])
    assert single.score() == pytest.approx(1e9 / estimate)
    assert single.error_count == 0


def test_accuracy_log_is_streamed(runs: dict[str, Path], tmp_path: Path) -> None:
    path = runs["accuracy"] / "mlperf_log_accuracy.json"
    entries = list(iter_accuracy_log(path))
    assert len(entries) == 1024 and {e["qsl_idx"] for e in entries} == set(range(1024))
    one_line = tmp_path / "one_line.json"
    one_line.write_text(json.dumps(entries[:3]))
    assert list(iter_accuracy_log(one_line)) == entries[:3]
    cut = tmp_path / "cut.json"
    cut.write_text(path.read_text()[:200])
    with pytest.raises(RunError, match="cut short"):
        list(iter_accuracy_log(cut))
    assert list(iter_accuracy_log(runs["offline"] / "mlperf_log_accuracy.json")) == []


def test_damaged_logs_are_reported(runs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RunError, match="not a LoadGen detail log"):
        parse_detail("hello\n", "x.txt")
    with pytest.raises(RunError, match="cannot read"):
        read_detail(tmp_path / "missing.txt")
    text = (runs["offline"] / "mlperf_log_detail.txt").read_text()
    log = parse_detail(text[: len(text) // 2].rsplit("\n", 1)[0] + '\n:::MLLOG {"key": "x", "va')
    assert log.unparsed_lines == 1 and log.get("result_validity") is None


def test_locate_logs_finds_output_dir(runs: dict[str, Path]) -> None:
    assert locate_logs(runs["offline"].parent) == runs["offline"]
    assert locate_logs(runs["offline"]) == runs["offline"]


def test_reading_only_some_keys_gives_their_first_values_and_every_error(
        runs: dict[str, Path], tmp_path: Path) -> None:
    """The prechecks read a few keys of many logs: the same first values and the same errors
    as a full read, and nothing else decoded."""
    keys = ("result_validity", "effective_qsl_rng_seed", "effective_sample_index_rng_seed",
            "effective_schedule_rng_seed")
    for name in ("offline", "twice", "test01"):
        path = runs[name] / "mlperf_log_detail.txt"
        full, few = read_detail(path), read_detail(path, keys)
        assert {k: few.get(k) for k in keys} == {k: full.get(k) for k in keys}
        assert few.error_lines == full.error_lines and few.seeds == full.seeds
        assert set(few.values) <= set(keys) | {e.key for e in full.errors}
        assert len(few.entries) < len(full.entries) / 5
    assert read_detail(runs["twice"] / "mlperf_log_detail.txt", keys).error_lines  # it has some
    text = (runs["offline"] / "mlperf_log_detail.txt").read_text()
    negative = text.replace('"key": "effective_qsl_rng_seed", "value": ',
                            '"key": "effective_qsl_rng_seed", "value": -', 1)
    assert negative != text and parse_detail(negative, "x", keys).seeds is None


def test_power_window_is_on_the_sample_logs_utc_clock(runs: dict[str, Path]) -> None:
    log = read_detail(runs["offline"] / "mlperf_log_detail.txt")
    stamp = str(log.get("power_begin"))
    assert log.power_begin is not None and log.power_begin.tzinfo is UTC
    assert parse_time(stamp) == log.power_begin and format_time(log.power_begin) == stamp
