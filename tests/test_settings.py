"""user.conf and audit.config: the text subrun writes, and what the real LoadGen reads from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.loadgen_log import read_detail
from bench.rules import load_rules
from bench.run import Mode, RunKind, Scenario
from bench.settings import (
    PerfTargets,
    ShortMode,
    audit_config,
    render_conf,
    run_settings,
    user_conf,
)
from lab.errors import ConfigError
from tests.support.loadgen_run import TinySut, run_loadgen

READ_CONF = """
import json, sys
import mlperf_loadgen as lg
s = lg.TestSettings()
rc = s.FromConfig(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
names = ["offline_expected_qps", "server_target_qps", "single_stream_expected_latency_ns",
         "min_duration_ms", "min_query_count", "accuracy_log_sampling_target",
         "accuracy_log_rng_seed", "performance_issue_same", "performance_issue_same_index",
         "mode", "qsl_rng_seed"]
print(json.dumps({"rc": rc, **{n: str(getattr(s, n)) for n in names}}))
"""


def loadgen_reads(tmp_path: Path, text: str, scenario: str, conf_type: int = 1) -> dict[str, str]:
    """TestSettings after the real LoadGen parsed text (in a fresh interpreter)."""
    conf = tmp_path / "test.conf"
    conf.write_text(text)
    done = subprocess.run([sys.executable, "-c", READ_CONF, str(conf), "resnet50", scenario,
                           str(conf_type)], capture_output=True, text=True, check=True,
                          cwd=tmp_path, timeout=60)
    read: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return read


def test_submission_mode_writes_only_targets(tmp_path: Path) -> None:
    settings = run_settings(Scenario.OFFLINE, Mode.SUBMISSION, PerfTargets(target_qps=2500))
    assert settings == {"*.Offline.target_qps": 2500}
    text = user_conf(settings, Mode.SUBMISSION, header="h2/resnet/Offline/performance")
    assert "min_duration" not in text and "mlperf.conf" in text
    read = loadgen_reads(tmp_path, text, "Offline")
    assert read["rc"] == 0
    assert float(read["offline_expected_qps"]) == 2500
    assert read["min_duration_ms"] == "600000"  # the official value, from LoadGen's mlperf.conf
    assert read["qsl_rng_seed"] == str(load_rules("v6.1").seeds.qsl_rng_seed)


def test_targets_go_to_the_keys_of_their_scenario() -> None:
    targets = PerfTargets(target_qps=40, target_latency_ms=2.5, extra={"coalesce_queries": 1})
    assert run_settings(Scenario.SINGLE_STREAM, Mode.SUBMISSION, targets) == {
        "*.SingleStream.target_latency": 2.5, "*.SingleStream.coalesce_queries": 1}
    assert run_settings(Scenario.INTERACTIVE, Mode.SUBMISSION, PerfTargets(target_qps=3)) == {
        "*.Server.target_qps": 3}


@pytest.mark.parametrize("key", ["min_duration", "min_query_count", "mode",
                                 "performance_sample_count_override"])
def test_submission_mode_refuses_lowering_official_values(key: str) -> None:
    with pytest.raises(ConfigError, match="official LoadGen setting"):
        run_settings(Scenario.OFFLINE, Mode.SUBMISSION, PerfTargets(extra={key: 1}))
    with pytest.raises(ConfigError, match="official"):
        user_conf({f"*.Offline.{key}": 1}, Mode.SUBMISSION)


def test_malformed_keys_and_values_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"model\.scenario\.key"):
        user_conf({"Offline.target_qps": 1}, Mode.SHORT)
    with pytest.raises(ConfigError, match="needs a number"):
        user_conf({"*.Offline.target_qps": "fast"}, Mode.SHORT)
    with pytest.raises(ConfigError, match=r"model\.scenario\.key"):  # `$` let this through
        user_conf({"*.Offline.min_duration\n": 1}, Mode.SUBMISSION)
    with pytest.raises(ConfigError, match="'min_duration' must be a whole number"):
        user_conf({"*.Offline.min_duration": -1}, Mode.SHORT)  # LoadGen: 2^64-1 ms
    with pytest.raises(ConfigError, match="did you mean 'target_qps'"):
        user_conf({"*.Offline.target_qsp": 10}, Mode.SHORT)


def test_short_mode_lowers_duration_and_counts_and_loadgen_runs_it(tmp_path: Path) -> None:
    short = ShortMode(min_duration_ms=500)
    settings = run_settings(Scenario.SINGLE_STREAM, Mode.SHORT,
                            PerfTargets(target_latency_ms=0.5), short)
    assert settings == {"*.SingleStream.target_latency": 0.5, "*.SingleStream.min_duration": 500,
                        "*.SingleStream.min_query_count": 64}
    out = run_loadgen(tmp_path, scenario="SingleStream", sut=TinySut(sample_time_us=400),
                      user_conf=user_conf(settings, Mode.SHORT))
    log = read_detail(out / "mlperf_log_detail.txt")
    assert log.effective["min_duration_ms"] == 500
    assert log.effective["min_query_count"] == 64
    assert log.valid and not log.errors


def test_numbers_are_written_as_loadgen_parses_them() -> None:
    text = render_conf({"*.Offline.target_qps": 2500.0, "*.*.accuracy_log_rng_seed":
                        720381539243781796, "*.Server.target_qps": 12.75})
    assert text.splitlines() == ["*.Offline.target_qps = 2500",
                                 "*.*.accuracy_log_rng_seed = 720381539243781796",
                                 "*.Server.target_qps = 12.75"]


def test_test01_audit_config_exact_lines(tmp_path: Path) -> None:
    text = audit_config(RunKind.TEST01, "resnet", load_rules("v6.1"))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["*.*.mode = 2", "*.*.accuracy_log_rng_seed = 720381539243781796",
                     "*.*.accuracy_log_sampling_target = 4096"]
    read = loadgen_reads(tmp_path, text, "Offline", conf_type=2)
    assert read["rc"] == 0 and read["accuracy_log_sampling_target"] == "4096"
    assert read["accuracy_log_rng_seed"] == "720381539243781796"
    assert read["mode"] == "TestMode.PerformanceOnly"


def test_test04_test05_test06_audit_configs(tmp_path: Path) -> None:
    rules = load_rules("v6.1")
    test04 = audit_config(RunKind.TEST04, "stable-diffusion-xl", rules)
    assert "*.SingleStream.performance_issue_same_index = 3" in test04
    assert test04.rstrip().endswith("stable-diffusion-xl.Offline.min_query_count = 500")
    read = loadgen_reads(tmp_path, test04, "SingleStream", conf_type=2)
    assert read["performance_issue_same"] == "True"
    assert read["performance_issue_same_index"] == "3"
    assert "*.*.test05 = 1" in audit_config(RunKind.TEST05, "resnet", rules)
    test06 = audit_config(RunKind.TEST06, "llama3.1-8b", rules)
    assert "*.*.accuracy_log_sampling_target = 100" in test06
    assert "*.*.min_duration = 0" in test06
    assert "*.*.test09_max_output_tokens = 301.19" in audit_config(
        RunKind.TEST09, "e2e-rag-qna", rules)


def test_audit_config_refuses_what_the_round_does_not_define() -> None:
    with pytest.raises(ConfigError, match="no TEST01 accuracy_log_sampling_target"):
        audit_config(RunKind.TEST01, "resnet", load_rules("v5.0"))
    with pytest.raises(ConfigError, match="not a compliance test"):
        audit_config(RunKind.ACCURACY, "resnet", load_rules("v6.1"))


def test_short_mode_keeps_the_durations_and_counts_a_campaign_sets() -> None:
    targets = PerfTargets(target_qps=8000, extra={"min_duration": 4000, "min_query_count": 2})
    settings = run_settings(Scenario.OFFLINE, Mode.SHORT, targets)
    assert settings["*.Offline.min_duration"] == 4000
    assert settings["*.Offline.min_query_count"] == 2


def test_short_test01_logs_the_official_share_of_its_responses() -> None:
    from bench.execute import run_files
    from bench.run import RunSpec

    rules = load_rules("v6.1")

    def files(mode: Mode, duration: int | None) -> str:
        settings = {"*.Server.min_duration": duration} if duration else {}
        spec = RunSpec(host="h", benchmark="digits", model="resnet", scenario=Scenario.SERVER,
                       kind=RunKind.TEST01, mode=mode, round="v6.1", settings=settings)
        return run_files(spec, rules)["audit.config"]

    # a 60 s short run logs a tenth of the round's 4096 samples; 3 s would be 20: floored at 64
    assert "*.*.accuracy_log_sampling_target = 410" in files(Mode.SHORT, 60000)
    assert "*.*.accuracy_log_sampling_target = 64" in files(Mode.SHORT, 3000)
    assert "*.*.accuracy_log_sampling_target = 4096" in files(Mode.SUBMISSION, None)
