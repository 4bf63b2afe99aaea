"""Telemetry: the trace parser and its flags on hand-made traces, the sampler's lifecycle on a
FakeHost, and the real sampler script on this machine for a few seconds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import sampler
from bench.run import Mode, RunKind, RunSpec, Scenario, Verdict
from bench.store import RunStore
from bench.telemetry import judge
from bench.trace import MAX_LINE, parse_trace, read_trace
from bench.trace_judge import summarize
from lab.local import LocalHost
from submission import telemetry_view
from submission.inputs import StoredRun
from testkit.fake_host import FakeHost, Reply
from testkit.submission_runs import real_runs, runs_of
from tests.test_submission_report import report_for

HZ = 100
EPOCH = 1_790_000_000


def header(**extra: object) -> str:
    return json.dumps({"v": 1, "epoch": EPOCH, "up": 1000.0, "hz": HZ, "run_unit": "us",
                       "gpu": "", "max_khz": [3_000_000, 3_000_000], "temps": ["zone0/cpu"],
                       "limits_mc": [95_000], **extra})


def trace(seconds: int, *, busy: float, run: float, khz: float = 3_000_000,
          temp_c: float = 50.0, cores: int = 2, gpu: list[str] | None = None) -> list[str]:
    """A trace of `seconds` 1-second samples: `busy` share of all cores in use, `run` cores
    used by the run, cores at `khz`, one zone at `temp_c`."""
    lines = [header()]
    used = idle = 0.0
    run_us = 0.0
    for i in range(seconds + 1):
        lines.append(json.dumps({
            "up": 1000.0 + i, "cpu": [used, 0, 0, idle, 0, 0, 0, 0],
            "cores": [[0] * 8] * cores, "khz": [khz] * cores, "temp_mc": [temp_c * 1000],
            "load": [1.5, 1, 1], "mem_kb": [8_000_000, 6_000_000], "run": run_us,
            "gpu": gpu or []}))
        used += busy * cores * HZ
        idle += (1 - busy) * cores * HZ
        run_us += run * 1e6
    return lines


def test_a_busy_run_alone_is_not_flagged() -> None:
    summary = summarize(parse_trace(trace(20, busy=1.0, run=1.95)))
    assert summary.samples == 21 and summary.cpus == 2 and summary.duration_s == 20.0
    assert summary.cpu_mean_pct == 100.0 and summary.run_cpu_mean_pct == 97.5
    assert summary.other_mean_pct == 2.5
    assert not summary.contended and not summary.throttled and summary.reasons == []
    assert summary.freq_max_mhz == 3000.0 and summary.freq_min_mhz == 3000.0
    assert summary.temp_max_c == 50.0 and summary.mem_min_available_mb == 5859.4


def test_other_processes_on_a_saturated_host_flag_contended() -> None:
    summary = summarize(parse_trace(trace(20, busy=1.0, run=1.0)))  # half the host is others'
    assert summary.contended and not summary.throttled
    assert summary.other_mean_pct == 50.0 and summary.contended_share == 1.0
    assert "contended" in summary.reasons[0]


def test_others_on_an_unsaturated_host_take_nothing_the_run_needed() -> None:
    summary = summarize(parse_trace(trace(20, busy=0.7, run=0.8)))  # 0.6 cores of others
    assert summary.other_mean_pct == 30.0
    assert not summary.contended


def test_a_short_burst_of_others_is_not_sustained() -> None:
    quiet = trace(30, busy=1.0, run=1.95)
    burst = trace(2, busy=1.0, run=0.5)  # two seconds of others: fewer than MIN_INTERVALS
    assert summarize(parse_trace(burst)).other_mean_pct == 75.0
    assert not summarize(parse_trace(burst)).contended
    assert not summarize(parse_trace(quiet)).contended


def per_core_trace(seconds: int, *, own: str, busy: tuple[float, ...], run: float
                   ) -> list[str]:
    """A trace with each core's jiffies: core i `busy[i]` in use, `run` cores used by the run,
    and the run's own cores `own` as its sampler read them."""
    lines = [header(own=own)]
    used, idle = [0.0] * len(busy), [0.0] * len(busy)
    for i in range(seconds + 1):
        rows = [[u, 0, 0, d, 0, 0, 0, 0] for u, d in zip(used, idle, strict=True)]
        lines.append(json.dumps({
            "up": 1000.0 + i, "cpu": [sum(used), 0, 0, sum(idle), 0, 0, 0, 0], "cores": rows,
            "ids": list(range(len(busy))), "khz": [], "temp_mc": [], "load": [1, 1, 1],
            "mem_kb": [8_000_000, 6_000_000], "run": i * run * 1e6, "gpu": []}))
        used = [u + b * HZ for u, b in zip(used, busy, strict=True)]
        idle = [d + (1 - b) * HZ for d, b in zip(idle, busy, strict=True)]
    return lines


def test_a_pinned_run_is_judged_on_its_own_cores() -> None:
    """Others keep core 0 busy; the run has core 1 to itself: contended on the whole host,
    not on the run's own cores, which is what pinning is for."""
    pinned = summarize(parse_trace(per_core_trace(20, own="1", busy=(1.0, 1.0), run=1.0)))
    assert pinned.own_cores == "1" and not pinned.contended
    assert pinned.run_cpu_mean_pct == 100.0 and pinned.other_mean_pct == 0.0
    assert pinned.cpu_mean_pct == 100.0  # the host as a whole stays in its numbers
    unpinned = summarize(parse_trace(per_core_trace(20, own="0-1", busy=(1.0, 1.0), run=1.0)))
    assert unpinned.own_cores == "0-1" and unpinned.contended
    assert unpinned.other_mean_pct == 50.0


def test_others_on_a_pinned_runs_own_cores_flag_it_contended() -> None:
    summary = summarize(parse_trace(per_core_trace(20, own="1", busy=(0.1, 1.0), run=0.5)))
    assert summary.contended and summary.other_mean_pct == 50.0
    assert "the run's cores 1" in summary.reasons[0]


def test_a_trace_without_its_cores_is_judged_on_all_of_them() -> None:
    summary = summarize(parse_trace(trace(20, busy=1.0, run=1.0)))
    assert summary.own_cores is None and summary.contended
    garbled = summarize(parse_trace(per_core_trace(20, own="1-x", busy=(1.0, 1.0), run=1.0)))
    assert garbled.own_cores is None and garbled.contended


def test_low_frequency_while_busy_flags_throttled() -> None:
    summary = summarize(parse_trace(trace(20, busy=0.9, run=1.8, khz=1_200_000)))
    assert summary.throttled and summary.freq_min_mhz == 1200.0
    assert "3000 MHz maximum" in summary.reasons[0]
    idle = summarize(parse_trace(trace(20, busy=0.1, run=0.2, khz=800_000)))
    assert not idle.throttled  # a slow clock while idle is power saving, not throttling


def test_a_temperature_at_its_limit_flags_throttled() -> None:
    summary = summarize(parse_trace(trace(10, busy=0.9, run=1.8, temp_c=96.0)))
    assert summary.throttled and summary.temp_max_c == 96.0
    assert "limit" in summary.reasons[0]


def test_gpus_from_nvidia_smi_rows() -> None:
    rows = ["87, 1410, 1980, 250.5, 71", "[N/A], 0, 0, x, 40"]
    lines = [header(gpu="nvidia"), *trace(3, busy=0.5, run=1.0, gpu=rows)[1:]]
    summary = summarize(parse_trace(lines))
    assert (summary.gpu_util_max_pct, summary.gpu_power_max_w, summary.gpu_temp_max_c) == (
        87.0, 250.5, 71.0)


def test_malformed_and_hostile_lines_are_skipped() -> None:
    lines = trace(10, busy=1.0, run=1.95)
    lines[3] = '{"up": 1003, "cpu": [1, 2'  # cut mid-write
    lines[4] = json.dumps({"up": 1004.0, "cpu": ["a", 1, 2, 3], "cores": []})
    lines[5] = json.dumps({"up": float("inf"), "cpu": [1, 2, 3, 4], "cores": []})
    lines.insert(6, "x" * (MAX_LINE + 1))
    lines.insert(7, json.dumps(["not", "an", "object"]))
    lines.insert(8, json.dumps({"v": 1, "epoch": "../../etc/passwd", "up": 1}))  # bad header
    lines.insert(9, json.dumps({"up": 1005.5, "cpu": [1, 1, 1, 1], "cores": []}))  # no header
    lines += trace(2, busy=1.0, run=1.0)  # a good header again: its samples count
    parsed = parse_trace(lines)
    # 3 broken samples, the long line, the array, the bad header, then the 1 + 6 samples
    # under it (their clock is unknown); the samples before and after are kept
    assert parsed.skipped == 13
    assert len(parsed.samples) == 2 + 3
    assert summarize(parsed).skipped_lines == 13


def test_samples_before_any_header_and_backwards_counters_give_no_intervals() -> None:
    lines = trace(5, busy=1.0, run=1.0)
    assert summarize(parse_trace(lines[1:])).samples == 0
    backwards = trace(5, busy=1.0, run=1.0)
    first = json.loads(backwards[1])
    first["cpu"] = [10**12] * 8
    backwards[1] = json.dumps(first)
    assert summarize(parse_trace(backwards)).samples == 6  # the interval from it is dropped


def test_read_trace_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(trace(5, busy=1.0, run=1.0)) + "\n" + "y" * (17 * 2**20))
    assert len(read_trace(path).samples) == 6


def spec() -> RunSpec:
    return RunSpec(host="fake", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
                   kind=RunKind.PERFORMANCE, mode=Mode.SHORT, round="v6.1")


def test_judge_records_the_summary_and_warns(tmp_path: Path, caplog: object) -> None:
    store = RunStore(tmp_path / "store")
    collected = tmp_path / "collected"
    collected.mkdir()
    (collected / sampler.TRACE).write_text("\n".join(trace(10, busy=1.0, run=1.0)) + "\n")
    record = store.start_attempt(spec())
    record = store.add_files(record.key, record.attempt, collected)
    judged = judge(store, record)
    assert judged.telemetry is not None and judged.telemetry.contended
    assert store.record(record.key, record.attempt).telemetry == judged.telemetry
    assert judge(store, judged) is judged  # once
    assert "contended" in caplog.text  # type: ignore[attr-defined]


def test_sampler_lifecycle_on_a_fake_host(tmp_path: Path) -> None:
    host = FakeHost()
    sampler.ensure(host, "c-key-a1", 4242, "cgroup")
    started = host.calls[-1].argv
    assert started[:2] == ("sh", "-c") and started[4:] == (
        sampler.trace_path(host, "c-key-a1"), "4242", "cgroup", str(sampler.MAX_SAMPLE_S), "")
    assert sampler.trace_path(host, "c-key-a1").startswith(f"{host.work_dir}/detached/")
    host.write(sampler.trace_path(host, "c-key-a1"), "\n".join(trace(3, busy=1, run=1)))
    local = tmp_path / "collected"
    local.mkdir()
    (local / sampler.TRACE).write_text("forged by the run")
    assert sampler.fetch(host, "c-key-a1", local)
    assert (local / sampler.TRACE).read_text().startswith('{"v": 1')
    sampler.remove(host, "c-key-a1")
    assert host.commands()[-1] == ("rm", "-rf", host.detached_dir("subrun-telemetry-c-key-a1"))
    (local / sampler.TRACE).write_text("forged by a run that was never sampled")
    assert not sampler.fetch(host, "never-sampled", local)
    assert not (local / sampler.TRACE).exists()


def test_a_running_sampler_is_kept_on_reattachment() -> None:
    host = FakeHost()
    host.on(["sh", "-c", sampler.SCRIPT], Reply(duration_s=3600))
    sampler.ensure(host, "rid", 1, "session")
    starts = len(host.calls)
    sampler.ensure(host, "rid", 1, "session")
    assert len(host.calls) == starts  # still running: not started twice


@pytest.mark.slow  # seconds of real sampling
def test_the_real_script_samples_this_machine(tmp_path: Path) -> None:
    """The sh loop on LocalHost beside a busy process: fields present, its CPU counted as the
    run's, the sampler's own cost recorded, and it ends by itself when the process ends."""
    host = LocalHost("local", str(tmp_path / "work"))
    busy = subprocess.Popen(["sh", "-c", "end=$(($(date +%s) + 4)); "
                             "while [ $(date +%s) -lt $end ]; do :; done"],
                            start_new_session=True)
    try:
        sampler.ensure(host, "rid", busy.pid, "session")
        busy.wait(timeout=30)
        found = host.find_detached(sampler.process_name("rid"))
        assert found is not None
        assert not host.wait_detached(found, timeout_s=10).running  # ended with the process
        assert sampler.fetch(host, "rid", tmp_path)
    finally:
        if busy.poll() is None:
            os.kill(busy.pid, 9)
        sampler.remove(host, "rid")
    lines = (tmp_path / sampler.TRACE).read_text().splitlines()
    first = json.loads(lines[1])
    assert {"up", "cpu", "cores", "khz", "temp_mc", "load", "mem_kb", "run", "gpu"} <= set(first)
    assert len(first["cores"]) == os.cpu_count() == len(first["ids"])
    allowed = next(line.split(":")[1].strip() for line in
                   Path("/proc/self/status").read_text().splitlines()
                   if line.startswith("Cpus_allowed_list:"))
    assert json.loads(lines[0])["own"] == allowed  # the busy process's cores, as this one's
    summary = summarize(read_trace(tmp_path / sampler.TRACE))
    assert summary.samples >= 3 and summary.skipped_lines == 0
    assert summary.run_cpu_mean_pct is not None and summary.run_cpu_mean_pct > 10
    assert summary.sampler_cpu_s is not None
    assert not os.path.exists(host.detached_dir(sampler.process_name("rid")))  # removed


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[StoredRun]:
    return runs_of(real_runs(tmp_path_factory.getbasetemp() / "submission-runs"))


def with_trace(run: StoredRun, folder: Path, lines: list[str]) -> StoredRun:
    """run with a trace among its files and its judged summary in its record (a copy)."""
    shutil.copytree(run.folder, folder)
    (folder / sampler.TRACE).write_text("\n".join(lines) + "\n")
    summary = summarize(parse_trace(lines))
    record = run.record.model_copy(update={"files": {**run.record.files, sampler.TRACE: "x"},
                                           "telemetry": summary})
    return StoredRun(record, folder)


@pytest.mark.slow  # real LoadGen runs stand under the report
def test_the_report_plots_traces_under_the_power_trace_and_lists_flagged_runs(
        tmp_path: Path, runs: list[StoredRun]) -> None:
    perf = [r for r in runs if r.spec.kind is RunKind.PERFORMANCE]
    busy = with_trace(perf[0], tmp_path / "busy", trace(10, busy=1.0, run=1.0))
    quiet = with_trace(perf[1], tmp_path / "quiet", trace(10, busy=1.0, run=1.95))
    others = [r for r in runs if r.record is not perf[0].record and r.record is not perf[1].record]
    _, report = report_for(tmp_path, [*others, busy, quiet], with_checker=False)
    names = [Path(f).name for f in report.figures]
    assert "telemetry.png" in names and names.index("telemetry.png") == names.index(
        "power.png") + 1
    md = report.markdown
    assert "## Telemetry" in md and "2 attempt(s) sampled" in md
    flagged = [line for line in md.splitlines() if line.startswith(f"| {busy.spec.label} |")]
    assert len(flagged) == 1 and "contended" in flagged[0] and "| 50 |" in flagged[0]
    assert not any(line.startswith(f"| {quiet.spec.label} |") for line in md.splitlines()
                   if "contended" in line)
    html = Path(report.html_path).read_text()
    assert html.count('src="data:image/png;base64,') == len(names)  # telemetry.png inlined too


@pytest.mark.slow  # real LoadGen runs stand under the report
def test_no_trace_no_telemetry_section(tmp_path: Path, runs: list[StoredRun]) -> None:
    """Runs that were never sampled add nothing; one quiet sampled run among them adds the
    section saying how many were sampled and that none was flagged, and its figure."""
    assert runs and all(r.record.telemetry is None and sampler.TRACE not in r.record.files
                        for r in runs)
    assert telemetry_view.section(runs) == []
    assert telemetry_view.figures(runs) == {}
    perf = next(r for r in runs if r.spec.kind is RunKind.PERFORMANCE)
    quiet = with_trace(perf, tmp_path / "quiet", trace(10, busy=1.0, run=1.95))
    others = [r for r in runs if r.record is not perf.record]
    assert telemetry_view.section([*others, quiet]) == [
        "## Telemetry", "", "1 attempt(s) sampled on their host at 1 Hz (CPU of the run and of "
        "other processes, frequency, temperature, memory, GPUs).",
        "No run was throttled or contended.", ""]
    figures = telemetry_view.figures([*others, quiet])
    assert list(figures) == ["telemetry.png"] and figures["telemetry.png"].startswith(b"\x89PNG")


def test_a_flagged_run_passes_and_its_progress_line_says_why(tmp_path: Path) -> None:
    from flows.outcome import RunOutcome  # flows import prefect: only this test needs it

    store = RunStore(tmp_path / "store")
    record = store.start_attempt(spec())
    summary = summarize(parse_trace(trace(10, busy=1.0, run=1.0)))
    record = store.update(record.key, record.attempt, state="finished", telemetry=summary,
                          verdict=Verdict(passed=True))
    result = RunOutcome.of(record)
    assert result.passed and result.flags == ("contended",)
