"""The campaign commands on bad and good input: plan, status, and clear errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def test_plan_of_the_demo_campaign_shows_runs_and_estimate() -> None:
    result = invoke("plan", str(ROOT / "campaigns" / "demo.yaml"))
    assert result.exit_code == 0, result.output
    assert "20 runs on 1 host(s)" in result.output
    assert "estimated wall time" in result.output and "not submittable" in result.output


@pytest.mark.parametrize("tune", ["auto", "true"])
def test_plan_with_tuning_and_no_record_lists_the_tuning_step(tune: str, tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(f"inventory: {ROOT / 'hosts.yaml'}\noutput_dir: {tmp_path / 'out'}\n"
                    f"tune: {tune}\ntune_probe_s: 5\n"
                    "hosts: [{host: local, benchmarks: [{benchmark: digits, "
                    "scenarios: [Offline, Server]}]}]\n")
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "│ tuning" in line]
    assert len(rows) == 2 and "Offline" in rows[0] and "Server" in rows[1], result.output
    flat = " ".join(result.output.split())
    assert "Tuning: 2 searches before the runs" in flat
    assert "revised after tuning" in flat and "counted in the wall time" in flat
    path.write_text(path.read_text().replace(f"tune: {tune}", "tune: false"))
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "tuning" not in result.output.lower(), result.output


@pytest.mark.parametrize(("text", "expected"), [
    ("hosts: [{host: local, benchmarks: [{benchmark: digitz}]}]\n", "did you mean 'digits'"),
    ("hosts: [{host: nowhere, benchmarks: [{benchmark: digits}]}]\n", "No host named 'nowhere'"),
    ("round: v9.9\nhosts: [{host: local, benchmarks: [{benchmark: digits}]}]\n",
     "No rules for round 'v9.9'"),
    ("mode: fast\nhosts: [{host: local, benchmarks: [{benchmark: digits}]}]\n",
     ":2: mode"),
    ("hosts: [{host: local, benchmarks: [{benchmark: digits, scenarios: [Ofline]}]}]\n",
     "scenarios"),
    ("hosts: []\n", "hosts"),
    ("max_reruns: 99\nhosts: [{host: local, benchmarks: [{benchmark: digits}]}]\n",
     "max_reruns"),
])
def test_bad_campaign_is_one_clear_error_with_exit_2(text: str, expected: str,
                                                     tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(f"inventory: {ROOT / 'hosts.yaml'}\n" + text)
    for command in ("plan", "status", "run"):
        result = invoke(command, str(path))
        assert result.exit_code == 2, (command, result.output)
        assert expected in result.output and "Traceback" not in result.output


def test_status_before_any_run_is_all_pending(tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(f"inventory: {ROOT / 'hosts.yaml'}\noutput_dir: {tmp_path / 'out'}\n"
                    "hosts: [{host: local, benchmarks: [{benchmark: digits, "
                    "scenarios: [Offline]}]}]\n")
    result = invoke("status", str(path))
    assert result.exit_code == 0, result.output
    assert "0 done, 0 failed, 0 running, 4 pending" in result.output
    assert "host local: nothing of the campaign left" in result.output


@pytest.mark.parametrize("content", ["", "{\"key\": \"trunc", "[]"])
def test_status_reports_a_corrupt_run_record_naming_it(tmp_path: Path, content: str) -> None:
    from bench.store import RunStore
    from flows.context import load_context, resolve_campaign

    path = tmp_path / "campaign.yaml"
    path.write_text(f"inventory: {ROOT / 'hosts.yaml'}\noutput_dir: {tmp_path / 'out'}\n"
                    "hosts: [{host: local, benchmarks: [{benchmark: digits, "
                    "scenarios: [Offline]}]}]\n")
    ctx = load_context(resolve_campaign(path, None))
    record = RunStore(ctx.campaign.paths.store).start_attempt(ctx.plan.runs[0].spec)
    broken = ctx.campaign.paths.store / record.key / "attempt-1" / "run.json"
    broken.write_text(content)  # what a power cut under an older subrun could leave
    result = invoke("status", str(path))
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    flat = " ".join(result.output.split())
    assert f"{broken}: the run record is empty or corrupt" in flat
    assert "Move that attempt folder out of the store" in flat
