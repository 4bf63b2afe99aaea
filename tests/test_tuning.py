"""The tuning step without the lab: which searches a campaign asks for, which records its runs
use (explicit settings first, stale records never), a probe read from LoadGen's summary, and
the report's view of a search."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import tuning
from bench.campaign import Campaign
from bench.manifest import load_manifest
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import Mode, RunKind, RunRecord, RunSpec, RunState, Scenario, Verdict
from bench.settings import PerfTargets
from bench.tuning import SIZING_S, TuneJob, confirm_seconds, probe_spec, read_probe
from bench.tuning_record import Probe, TuningBook, TuningKey
from bench.tuning_use import plan_tuning, records_for, tuned_campaign, with_start
from submission import tuning_view

AT = datetime(2025, 1, 1, tzinfo=UTC)
DIGITS = {"digits": load_manifest("digits")}
KEY = TuningKey("h2", "digits", Scenario.SERVER, "sha256:aaaa", "6.0.17", "v6.1")
DIGESTS = {("h2", "digits"): "sha256:aaaa"}


def campaign(tmp_path: Path, settings: dict[str, object] | None = None,
             tune: object = "auto", name: str = "c") -> Campaign:
    return Campaign.model_validate({
        "name": name, "output_dir": str(tmp_path), "tune": tune,
        "hosts": [{"host": "h2", "benchmarks": [{"benchmark": "digits",
                                                 "scenarios": ["Offline", "Server"],
                                                 "settings": settings or {}}]}]})


def finished(book: TuningBook, key: TuningKey, qps: float, campaign: str = "c") -> None:
    book.begin(key, campaign)
    book.add_probe(key, Probe(settings={"*.Server.target_qps": qps}, valid=True,
                              latency_ns=4e6, latency_bound_ns=15e6, duration_s=9, at=AT))
    book.finish(key, chosen={"*.Server.target_qps": round(qps * 0.95, 1)}, found=qps,
                margin=0.05, resolution=0.02)


def server_qps(c: Campaign) -> float:
    plan = make_plan(c, DIGITS, load_rules("v6.1"))
    run = next(r for r in plan.runs if r.spec.scenario is Scenario.SERVER
               and r.spec.kind is RunKind.PERFORMANCE)
    return float(run.spec.settings["*.Server.target_qps"])


def test_a_current_record_beats_the_manifest_default_not_the_campaign(tmp_path: Path) -> None:
    c = campaign(tmp_path)
    book = TuningBook(c.paths.tuning)
    finished(book, KEY, 1262)
    used, notes = records_for(c, DIGITS, book, DIGESTS, "6.0.17")
    assert server_qps(tuned_campaign(c, used)) == 1198.9 and "1198.9" in notes[0]
    explicit = campaign(tmp_path, {"Server": {"target_qps": 700}})
    used, notes = records_for(explicit, DIGITS, book, DIGESTS, "6.0.17")
    assert not used and "sets target_qps" in notes[0]
    assert server_qps(tuned_campaign(explicit, used)) == 700


def test_a_stale_record_is_not_used_and_the_plan_says_why(tmp_path: Path) -> None:
    c = campaign(tmp_path)
    book = TuningBook(c.paths.tuning)
    finished(book, KEY, 1262)
    used, notes = records_for(c, DIGITS, book, {("h2", "digits"): "sha256:bbbb"}, "6.0.17")
    assert not used and "stale" in notes[0] and "the host has bbbb" in notes[0]
    assert server_qps(tuned_campaign(c, used)) == 1500  # the manifest's default
    before, _ = records_for(c, DIGITS, book)  # before provisioning: the round's newest
    assert (("h2", "digits", Scenario.SERVER)) in before
    other_round, notes = records_for(campaign(tmp_path).model_copy(update={"round": "v6.0"}),
                                     DIGITS, book)
    assert not other_round and "round v6.1" in notes[0]


def test_auto_keeps_current_records_and_true_tunes_once_per_campaign(tmp_path: Path) -> None:
    book = TuningBook(tmp_path / "tuning")
    finished(book, KEY, 1262, campaign="other")
    auto = plan_tuning(campaign(tmp_path), DIGITS, book, DIGESTS, "6.0.17")
    assert [(p.triple[2], p.job is not None) for p in auto] == [
        (Scenario.OFFLINE, True), (Scenario.SERVER, False)]  # Offline first
    again = plan_tuning(campaign(tmp_path, tune=True), DIGITS, book, DIGESTS, "6.0.17")
    assert all(p.job is not None and p.job.fresh for p in again)
    finished(book, KEY, 1262, campaign="c")
    mine = plan_tuning(campaign(tmp_path, tune=True), DIGITS, book, DIGESTS, "6.0.17")
    assert mine[1].job is None and mine[1].why.startswith("kept")
    explicit = plan_tuning(campaign(tmp_path, {"Server": {"target_qps": 700}}), DIGITS, book,
                           DIGESTS, "6.0.17")
    assert explicit[1].job is None and "target_qps" in explicit[1].why


def test_a_confirmation_is_as_long_as_the_run_up_to_its_cap(tmp_path: Path) -> None:
    """Short probes, a confirmation as long as the official run: 60 s when the run's settings
    say so, short mode's second (never below a probe), submission mode's capped at 120 s."""
    book = TuningBook(tmp_path / "tuning")
    sixty = campaign(tmp_path, {"Server": {"min_duration": 60000}}).model_copy(
        update={"tune_probe_s": 5})
    job = plan_tuning(sixty, DIGITS, book, DIGESTS, "6.0.17")[1].job
    assert job is not None and job.config.confirm_s == 60 and job.probe_s == 5
    spec = probe_spec(job, 900, job.config.confirm_s)
    assert spec.settings["*.Server.min_duration"] == 60000 and spec.kind is RunKind.TUNING
    assert probe_spec(job, 900).settings["*.Server.min_duration"] == 5000
    short = campaign(tmp_path).model_copy(update={"tune_probe_s": 3})
    assert confirm_seconds(short) == 3  # short mode's run is a second: a probe's length
    submission = short.model_copy(update={"mode": Mode.SUBMISSION, "tune_probe_s": None})
    assert confirm_seconds(submission, 600) == 120 and confirm_seconds(submission) == 120
    assert confirm_seconds(submission.model_copy(update={"tune_confirm_s": 300}), 600) == 300


def test_an_offline_probe_at_the_hosts_rate_issues_its_length_of_samples(tmp_path: Path) -> None:
    """LoadGen issues 1.1 x target_qps x min_duration Offline samples: a probe's minimum duration
    leaves that slack inside its length, so at a target the host sustains it lasts its length."""
    book = TuningBook(tmp_path / "tuning")
    job = plan_tuning(campaign(tmp_path).model_copy(update={"tune_probe_s": 5}), DIGITS, book,
                      DIGESTS, "6.0.17")[0].job
    assert job is not None and job.key.scenario is Scenario.OFFLINE
    settings = probe_spec(job, 400_000).settings
    issued = 1.1 * settings["*.Offline.target_qps"] * settings["*.Offline.min_duration"] / 1000
    assert settings["*.Offline.min_duration"] == 4545
    assert issued == pytest.approx(400_000 * 5, rel=1e-3)


def test_a_server_search_starts_no_higher_than_offline_and_singlestream_found(
        tmp_path: Path) -> None:
    book = TuningBook(tmp_path / "tuning")
    job = plan_tuning(campaign(tmp_path), DIGITS, book, DIGESTS, "6.0.17")[1].job
    assert job is not None and job.start > 400  # the manifest's default
    assert with_start(job, book) is job  # nothing known yet
    offline, stream = KEY._replace(scenario=Scenario.OFFLINE), \
        KEY._replace(scenario=Scenario.SINGLE_STREAM)
    book.begin(offline)
    book.add_probe(offline, Probe(settings={"*.Offline.target_qps": 12000}, valid=True,
                                  samples_per_s=640, duration_s=6, at=AT))
    assert with_start(job, book).start == 640  # a search under way: its last probe
    book.finish(offline, chosen={"*.Offline.target_qps": 672}, found=650, margin=0.05)
    assert with_start(job, book).start == 650
    book.begin(stream)
    book.finish(stream, chosen={"*.SingleStream.target_latency": 2}, found=2.5, margin=0.05)
    assert with_start(job, book).start == 400  # one query per 2.5 ms
    low = dataclasses.replace(job, start=100)
    assert with_start(low, book).start == 100  # a cap, never a raise
    offline_job = dataclasses.replace(job, key=offline)
    assert with_start(offline_job, book) is offline_job  # only Server searches


def test_an_offline_search_sizes_its_first_probe_to_the_host_s_rate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A default 3x above what the host does: a 1-s sizing probe at it measures the rate, and
    the search's probes run at that rate, as long as their minimum duration."""
    rate, calls = 300_000.0, []

    def fake_probe(target: object, job: TuneJob, value: float, *args: object,
                   seconds: float | None = None) -> Probe:  # LoadGen's Offline arithmetic
        calls.append((value, seconds))
        minimum = seconds or job.probe_s
        return Probe(settings={"*.Offline.target_qps": value}, valid=value <= rate,
                     samples_per_s=rate, at=AT,
                     duration_s=max(minimum, 1.1 * value * minimum / rate))

    monkeypatch.setattr(tuning, "run_probe", fake_probe)
    book = TuningBook(tmp_path / "tuning")
    key = KEY._replace(scenario=Scenario.OFFLINE)
    job = TuneJob(key=key, start=3 * rate, model="resnet50", targets=PerfTargets(), probe_s=5)
    record = tuning.tune(None, job, book, None, None)  # type: ignore[arg-type]
    assert calls == [(3 * rate, SIZING_S), (rate, None)]
    assert record.found == rate and len(record.probes) == 1  # the sizing probe is not the search's
    assert all(p.duration_s <= 1.5 * job.probe_s for p in record.probes)
    calls.clear()
    book.begin(key)
    ran_out = {"valid": False, "settings": {"*.Offline.target_qps": rate / 3}}
    book.add_probe(key, record.probes[0].model_copy(update=ran_out))
    tuning.tune(None, job, book, None, None)  # type: ignore[arg-type]
    assert calls == [(rate, None)]  # a search under way is not sized again


SUMMARY = """================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : 1011.70
Result is : INVALID
  Performance constraints satisfied : NO
Mean latency (ns)               : 1584432
99.00 percentile latency (ns)   : 23804813
99.90 percentile latency (ns)   : 25674856
target_qps : 1100
target_latency (ns): 15000000
"""


def test_a_probe_is_read_from_the_summary_and_invalid_is_information(tmp_path: Path) -> None:
    folder = tmp_path / "attempt-1"
    (folder / "output").mkdir(parents=True)
    (folder / "output" / "mlperf_log_summary.txt").write_text(SUMMARY)
    (folder / "output" / "mlperf_log_detail.txt").write_text(
        ':::MLLOG {"key": "effective_target_latency_percentile", "value": 0.99}\n')
    spec = RunSpec(host="h2", benchmark="digits", model="resnet", scenario=Scenario.SERVER,
                   kind=RunKind.TUNING, mode=Mode.SHORT, round="v6.1",
                   settings={"*.Server.target_qps": 1100.0})
    run = RunRecord(spec=spec, key=spec.key, attempt=1, state=RunState.FINISHED,
                    started_at=AT, finished_at=AT.replace(second=12), settle_s=0.5,
                    verdict=Verdict(passed=True))
    probe = read_probe(run, folder)
    assert not probe.valid and probe.samples_per_s == 1011.7
    assert probe.latency_ns == 23804813 and probe.latency_bound_ns == 15e6
    assert probe.duration_s == 12.5 and probe.settings == spec.settings


def test_the_report_draws_each_server_search(tmp_path: Path) -> None:
    book = TuningBook(tmp_path)
    book.begin(KEY, "c")
    for qps, valid, confirm in ((1262, True, False), (1300, False, False), (1198.9, True, True)):
        book.add_probe(KEY, Probe(settings={"*.Server.target_qps": qps}, valid=valid,
                                  latency_ns=4e6 if valid else 30e6, latency_bound_ns=15e6,
                                  duration_s=9, at=AT, confirm=confirm))
    book.finish(KEY, chosen={"*.Server.target_qps": 1198.9}, found=1262, margin=0.05,
                resolution=0.02)
    records = book.records()
    assert [p.confirm for p in records[0].probes] == [False, False, True]  # kept in the record
    assert tuning_view.figures(records)["tuning.png"].startswith(b"\x89PNG")
    table = "\n".join(tuning_view.section(records))
    assert "h2/digits/Server" in table and "1198.9" in table and "5%" in table


def test_tune_show_prints_current_and_stale_records(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    book = TuningBook(tmp_path / "tuning")
    finished(book, KEY._replace(image_digest="sha256:0ld0"), 1100)
    finished(book, KEY, 1262)
    result = CliRunner().invoke(app, ["tune", "--show", "--output", str(tmp_path)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "h2/digits/Server" in line]
    assert len(lines) == 2 and "stale" in lines[0] and "0ld0" in lines[0], result.output
    assert "current" in lines[1] and "1198.9" in lines[1]
