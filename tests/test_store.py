"""The run store: attempts in folders of their own, checksummed on arrival, never overwritten."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from bench.run import Mode, RunKind, RunSpec, Scenario
from bench.settings import PerfTargets, ShortMode, run_settings, user_conf
from bench.store import RunStore
from bench.verdict import judge_dir
from lab.errors import RunError
from tests.support.loadgen_run import TinySut, run_loadgen


def make_spec(target_qps: float = 6000) -> RunSpec:
    settings = run_settings(Scenario.OFFLINE, Mode.SHORT, PerfTargets(target_qps=target_qps),
                            ShortMode(min_duration_ms=300))
    return RunSpec(host="local", benchmark="tiny", model="resnet", scenario=Scenario.OFFLINE,
                   kind=RunKind.PERFORMANCE, mode=Mode.SHORT, round="v6.1", settings=settings)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory as the execution layer collects it: user.conf plus LoadGen's output."""
    run_dir = tmp_path_factory.mktemp("collected")
    run_loadgen(run_dir, scenario="Offline", sut=TinySut(sample_time_us=250),
                user_conf=user_conf(make_spec().settings, Mode.SHORT))
    return run_dir


def test_attempt_of_a_real_run_is_stored_checksummed_and_judged(collected: Path,
                                                                tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path / "runs"), make_spec()
    record = store.add_attempt(spec, collected, exit_status=0)
    folder = tmp_path / "runs" / spec.key / "attempt-1"
    assert store.path(spec.key, 1) == folder and (folder / "run.json").is_file()
    assert record.state == "finished" and record.attempt == 1 and record.key == spec.key
    assert {"user.conf", "output/mlperf_log_detail.txt", "output/mlperf_log_summary.txt",
            "output/mlperf_log_accuracy.json"} <= set(record.files)
    detail = (collected / "output" / "mlperf_log_detail.txt").read_bytes()
    assert record.files["output/mlperf_log_detail.txt"] == hashlib.sha256(detail).hexdigest()
    assert store.verify(spec.key, 1) == []
    verdict = judge_dir(spec, folder)
    stored = store.update(spec.key, 1, verdict=verdict)
    assert store.record(spec.key, 1) == stored and stored.verdict == verdict
    assert store.latest_passing(spec.key) == stored and verdict.passed


def test_files_are_never_overwritten_and_reruns_are_new_attempts(collected: Path,
                                                                 tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path), make_spec()
    first = store.add_attempt(spec, collected)
    with pytest.raises(RunError, match="never overwritten"):
        store.add_files(spec.key, first.attempt, collected)
    second = store.add_attempt(spec, collected)
    assert (first.attempt, second.attempt) == (1, 2)
    assert [r.attempt for r in store.attempts(spec.key)] == [1, 2]
    assert store.latest(spec.key) == second
    with pytest.raises(RunError, match=r"only .* change"):
        store.update(spec.key, 1, files={})


def test_latest_passing_skips_failed_and_running_attempts(collected: Path,
                                                          tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path), make_spec()
    good = store.add_attempt(spec, collected)
    good = store.update(spec.key, good.attempt, verdict=judge_dir(spec, store.path(spec.key, 1)))
    bad = store.add_attempt(spec.model_copy(update={"round": "v6.0"}), collected)  # other key
    assert bad.key != spec.key
    store.update(bad.key, bad.attempt,
                 verdict=judge_dir(bad.spec, store.path(bad.key, bad.attempt)))
    running = store.start_attempt(spec)
    assert running.state == "running" and store.latest(spec.key) == running
    assert store.latest_passing(spec.key) == good
    assert store.latest_passing(bad.key) is None  # seeds of v6.1 judged as v6.0
    assert {r.key for r in store.runs()} == {spec.key, bad.key} == set(store.keys())


def test_tampered_or_missing_files_are_detected(collected: Path, tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path), make_spec()
    store.add_attempt(spec, collected)
    folder = store.path(spec.key, 1)
    (folder / "user.conf").write_text("changed\n")
    (folder / "output" / "mlperf_log_summary.txt").unlink()
    assert sorted(store.verify(spec.key, 1)) == ["output/mlperf_log_summary.txt", "user.conf"]


def test_parallel_attempts_get_distinct_folders(tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path), make_spec()
    numbers: list[int] = []
    threads = [threading.Thread(target=lambda: numbers.append(store.start_attempt(spec).attempt))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(numbers) == list(range(1, 9))


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    store, spec = RunStore(tmp_path), make_spec()
    record = store.start_attempt(spec)
    with pytest.raises(RunError, match="not a directory"):
        store.add_files(spec.key, record.attempt, tmp_path / "nowhere")
    with pytest.raises(RunError, match="no such attempt"):
        store.record(spec.key, 9)
    with pytest.raises(RunError, match="not a run key"):
        store.path("../etc", 1)
    (store.path(spec.key, 1) / "run.json").write_text("{not json")
    with pytest.raises(RunError, match="run record is empty or corrupt"):
        store.latest(spec.key)
    assert RunStore(tmp_path / "empty").runs() == []
