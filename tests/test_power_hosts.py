"""Each host's power is read from its own analyzer, and hosts that share one take turns: a power
run waits for the analyzer instead of failing (real lab, real Prefect API, simulated WT310E)."""

from __future__ import annotations

import re
import socket
import threading
import uuid
from datetime import datetime
from pathlib import Path

import pytest

import power
from bench.campaign import load_campaign
from bench.power_samples import read_samples
from bench.run import RunKind, RunRecord
from bench.store import RunStore
from flows import progress
from lab.config import Inventory
from power.lock import analyzer_lock
from tests.support.campaigns import QUICK_POWER_SCENARIOS, write_campaign
from tests.support.power_inventory import stop_lab_daemon, with_analyzers

pytestmark = pytest.mark.lab


def test_two_hosts_sharing_an_analyzer_both_pass_one_after_the_other(
        prefect_api: None, lab_dir: Path, tmp_path: Path) -> None:
    """The analyzer's lock is held here when the campaign starts: the first power run to ask
    for it says whom it waits for, then measures once it is let go."""
    from flows.submission import submission

    inventory = with_analyzers(lab_dir / "hosts.yaml", tmp_path,
                               {"h2": "sim-wt310e", "h3": "sim-wt310e"})
    path = write_campaign(tmp_path, "shared-analyzer", inventory, ["h2", "h3"],
                          accuracy=False, power=True, scenarios=QUICK_POWER_SCENARIOS)
    ours = f"test-holder-{uuid.uuid4().hex[:8]}"
    ours_named = f"analyzer 'sim-wt310e' is in use by run {ours}"
    taken, named = threading.Event(), threading.Event()

    def hold() -> None:  # let go once a run named us, or after a bound a run never needs
        with analyzer_lock("sim-wt310e", ours, timeout_s=600):
            taken.set()
            named.wait(timeout=600)

    steps: list[progress.Step] = []

    def listen(step: progress.Step) -> None:
        steps.append(step)
        if step.outcome == "waiting" and step.label.endswith(ours_named):
            named.set()

    holding = threading.Thread(target=hold, name="analyzer-holder")
    holding.start()
    progress.listen(listen)
    try:
        assert taken.wait(timeout=610), "the analyzer's lock was never free"
        state = submission(campaign_file=str(path), return_state=True)
    finally:
        progress.unlisten(listen)
        named.set()
        holding.join(timeout=30)
    assert state.is_completed(), state.message
    store = RunStore(load_campaign(path).paths.store)
    power = [r for r in store.runs() if r.spec.kind is RunKind.POWER]
    assert sorted(r.spec.host for r in power) == ["h2", "h3"]
    assert all(r.verdict is not None and r.verdict.passed for r in power)
    first, second = sorted(_analyzer_window(store, r) for r in power)
    assert first[1] <= second[0], (first, second)  # measured one after the other
    waits = [s.label for s in steps if s.outcome == "waiting"]
    assert sum(label.endswith(ours_named) for label in waits) == 1, waits
    for label in waits:  # any other wait names its holder too
        # the slot names the flow run holding it; the lock, a controller without a server;
        # the leases on the targets, the campaign and controller holding them
        assert ("analyzer:sim-wt310e is held by flow run '" in label
                or "analyzer 'sim-wt310e' is in use by run " in label
                or "(analyzer-sim-wt310e lease) is held by campaign '" in label), label


def _analyzer_window(store: RunStore, record: RunRecord) -> tuple[datetime, datetime]:
    """From the first ranging sample to the last testing sample: the analyzer's use."""
    folder = store.path(record.key, record.attempt)
    ranging = read_samples(folder / "ranging" / "spl.txt")
    testing = read_samples(folder / "run_1" / "spl.txt")
    return ranging[0].time, testing[-1].time


def heavy_sim(folder: Path) -> Path:
    """The shipped WT310E simulation reading about 600 W idle and busy: unmistakable."""
    text = (Path(power.__file__).parent / "wt310e.yaml").read_text()
    for item in ("2", "6"):
        text = re.sub(rf'(VALUE\? {item}", r: "\{{RANDOM\()[^)]*\)', r"\g<1>2.60, 2.70, 1)", text)
    for item in ("3", "7"):
        text = re.sub(rf'(VALUE\? {item}", r: "\{{RANDOM\()[^)]*\)', r"\g<1>600.0, 620.0, 1)",
                      text)
    path = folder / "heavy-wt310e.yaml"
    path.write_text(text)
    return path


def test_each_host_is_read_from_its_own_analyzer(prefect_api: None, lab_dir: Path,
                                                 lab_inventory: Inventory,
                                                 tmp_path: Path) -> None:
    from flows.submission import submission

    heavy = f"sim-heavy-{uuid.uuid4().hex[:6]}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    inventory = with_analyzers(lab_dir / "hosts.yaml", tmp_path, {"h2": "sim-wt310e", "h3": heavy},
                               extra=[{"name": heavy, "model": "WT310E", "resource": "sim",
                                       "host": "local", "port": port,
                                       "sim_file": str(heavy_sim(tmp_path))}])
    path = write_campaign(tmp_path, "own-analyzers", inventory, ["h2", "h3"],
                          accuracy=False, power=True, scenarios=QUICK_POWER_SCENARIOS)
    try:
        state = submission(campaign_file=str(path), return_state=True)
    finally:
        stop_lab_daemon(lab_inventory, heavy)
    assert state.is_completed(), state.message
    store = RunStore(load_campaign(path).paths.store)
    watts = {r.spec.host: r.verdict.metrics["power_w"] for r in store.runs()
             if r.spec.kind is RunKind.POWER and r.verdict is not None}
    assert watts["h3"] > 500, watts  # the heavy analyzer, on h3's feed
    assert watts["h2"] < 200, watts  # the shipped simulation: 40 W idle, 145 W busy
