"""A campaign with compliance on a lab host: accuracy, TEST01 and TEST04 in all four scenarios,
where the performance runs of Offline and Server start at targets the host cannot hold.

Offline starts far below the host's rate (the run ends before its minimum duration) and Server
far above it (it misses its latency bound): each is re-run at a target from what it measured, and
its tests must run at *that* attempt's load x their derate, read back from the user.conf they
ran with, and pass against it. The report says, per test, at which load of which attempt it ran.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.run import RunKind, Scenario
from bench.settings import render_conf
from bench.store import RunStore
from tests.support.campaigns import write_campaign

pytestmark = pytest.mark.lab
DERATE = {RunKind.TEST01: 0.96, RunKind.TEST04: 0.97}  # images/digits/benchmark.yaml


def test_compliance_tests_run_at_their_reference_attempts_load(
        prefect_api: None, lab_dir: Path, tmp_path: Path, controller_off_h2: object) -> None:
    from flows.submission import submission

    path = write_campaign(tmp_path, "compliance", lab_dir / "hosts.yaml", ["h2"],
                          scenarios=("SingleStream", "MultiStream", "Offline", "Server"),
                          compliance=True,
                          settings={"Offline": {"target_qps": 2000},
                                    "Server": {"target_qps": 100000}})
    text = path.read_text().replace("compliance: true", "compliance: true\nmax_reruns: 8")
    path.write_text(text)
    outcome = submission(campaign_file=str(path))
    assert outcome.runs == 16 and outcome.passed == 16, outcome.failed

    store = RunStore(load_campaign(path).paths.store)
    keys = store.keys()
    records = [r for k in keys for r in store.attempts(k)]
    report = Path(outcome.report).with_suffix(".md").read_text()
    for scenario in Scenario.SERVER, Scenario.OFFLINE:
        perf = [r for r in records if r.spec.scenario is scenario
                and r.spec.kind is RunKind.PERFORMANCE]
        standing = store.standing(perf[0].key)
        assert standing is not None and standing.attempt > 1  # the plan's target failed
        key = f"*.{scenario.loadgen}.target_qps"
        reference_qps = standing.spec.settings[key]
        assert isinstance(reference_qps, float)
        for kind in (RunKind.TEST01, RunKind.TEST04):
            test = next(r for r in records if r.spec.scenario is scenario and r.spec.kind is kind)
            latest = store.latest(test.key)
            assert latest is not None and latest.references["performance"] == standing.attempt
            factor = DERATE[kind] if scenario is Scenario.SERVER else 1.0
            expected = round(reference_qps * factor, 3)
            assert latest.spec.settings[key] == expected
            source = latest.reverifies or latest.attempt  # a re-verification ran nothing
            conf = (store.path(latest.key, source) / "user.conf").read_text()
            assert render_conf({key: expected}).strip() in conf.splitlines()
            ratio = "the same" if factor == 1.0 else f"{factor:.2f} x {reference_qps:g}"
            line = (f"| h2/digits/{scenario.value} {kind.value} | attempt {latest.attempt} at "
                    f"target_qps {expected:g} ({ratio}) of performance attempt "
                    f"{standing.attempt} |")
            assert line in report, report
    # the latency scenarios' tests ran at their reference's expected latency
    for scenario in Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM:
        lines = [ln for ln in report.splitlines()
                 if re.match(rf"\| h2/digits/{scenario.value} TEST0[14] \| attempt \d+ at "
                             r"target_latency [\d.e-]+ \(the same\)", ln)]
        assert len(lines) == 2, report
