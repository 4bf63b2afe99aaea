"""Lab: a short campaign keeps its plan (plan.json) and its report sets each run's estimate
beside its actual wall time."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.plan_record import read_plan
from tests.support.campaigns import write_campaign

pytestmark = pytest.mark.lab


def test_a_campaign_keeps_its_plan_and_reports_estimate_vs_actual(
        prefect_api: None, lab_dir: Path, tmp_path: Path) -> None:
    from flows.submission import submission

    path = write_campaign(tmp_path, "plan-kept", lab_dir / "hosts.yaml", ["h2"],
                          scenarios=("Offline", "SingleStream"), accuracy=False,
                          settings={"Offline": {"target_qps": 1000}})  # about 3 s
    outcome = submission(campaign_file=str(path))
    assert outcome.passed == outcome.runs == 2, outcome.failed
    kept = read_plan(load_campaign(path).paths.plan)
    assert kept is not None
    assert [r.label for r in kept.runs] == ["h2/digits/Offline/performance",
                                            "h2/digits/SingleStream/performance"]
    assert all(r.estimate_s > 0 and r.key for r in kept.runs)
    report = (Path(outcome.report).parent / "report.md").read_text()
    section = report.split("## Estimate vs actual", 1)[1].split("\n## ", 1)[0]
    for run in kept.runs:
        row = next(line for line in section.splitlines() if line.startswith(f"| {run.label} |"))
        assert "not run" not in row and "%" in row and run.basis.value in row
    (host,) = outcome.host_times
    assert host.host == "h2" and host.actual_s is not None and host.runs == 2
