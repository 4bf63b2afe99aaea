"""Offline tuning on the lab sizes its probes: with a start 3x above what h2 sustains (LoadGen
would issue the samples of 3.3 x its minimum duration), a sizing probe of a second measures the
rate and every probe of the search lasts about its `tune_probe_s`, not three times it."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from bench.campaign import load_campaign
from bench.loadgen_log import DETAIL, locate_logs, read_detail
from bench.manifest import load_manifest
from bench.rules import load_rules
from bench.run import RunKind
from bench.store import RunStore
from bench.tune_search import probed
from bench.tuning import PROBE_OVERHEAD_S, SIZING_S, probe_spec, run_probe, tune
from bench.tuning_record import TuningBook
from bench.tuning_use import plan_tuning
from lab.config import Inventory
from tests.support.targets import provisioned_target

pytestmark = pytest.mark.lab
PROBE_S = 5


def test_an_offline_probe_lasts_its_probe_length_whatever_the_start(
        lab_dir: Path, lab_inventory: Inventory, tmp_path: Path) -> None:
    name = f"sizing-{uuid.uuid4().hex[:6]}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "inventory": str(lab_dir / "hosts.yaml"), "round": "v6.1",
        "division": "open", "mode": "short", "accuracy": False, "compliance": False,
        "output_dir": str(tmp_path / "out"), "tune": "auto", "tune_probe_s": PROBE_S,
        "hosts": [{"host": "h2", "benchmarks": [{"benchmark": "digits",
                                                 "scenarios": ["Offline"]}]}]}))
    campaign = load_campaign(path)
    target = provisioned_target(lab_inventory, "h2", campaign=name)
    try:
        book, store = TuningBook(campaign.paths.tuning), RunStore(campaign.paths.store)
        rules = load_rules(campaign.round)
        [planned] = plan_tuning(campaign, {"digits": load_manifest("digits")}, book,
                                {("h2", "digits"): target.image_id}, "")
        assert planned.job is not None
        rate = run_probe(target, planned.job, planned.job.start, store, rules,
                         seconds=2).samples_per_s
        assert rate
        job = replace(planned.job, start=round(3 * rate))  # a default 3x above the host's rate
        record = tune(target, job, book, store, rules)
    finally:
        target.host.close()
    assert record.done and record.found and record.probes
    for probe in record.probes:  # LoadGen's run, then container start and collection around it
        key, attempt = probe.attempt.rsplit("/attempt-", 1)
        detail = read_detail(locate_logs(store.path(key, int(attempt))) / DETAIL)
        assert detail.power_begin and detail.power_end
        loadgen_s = (detail.power_end - detail.power_begin).total_seconds()
        assert loadgen_s <= 1.5 * PROBE_S, (loadgen_s, probe)
        assert probe.duration_s <= 1.5 * PROBE_S + PROBE_OVERHEAD_S, probe
    first = probed(record.probes[0], job.key.scenario)
    assert first is not None and first < 2 * rate  # at the measured rate, not the start
    sized = [r for r in store.runs() if r.spec.kind is RunKind.TUNING
             and r.spec.settings == probe_spec(job, job.start, SIZING_S).settings]
    assert len(sized) == 1 and sized[0].spec.settings["*.Offline.target_qps"] == job.start
