"""An official power run keeps the lifecycle of every run: the link to h2 drops while power-dev's
client runs in the container, and the controller reattaches to the same attempt (and to the
power-dev server still serving on the director) instead of starting another. A few minutes; uses
the pinned power-dev like the campaign test."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import target as remote
from bench.campaign import Campaign
from bench.plan import make_plan
from bench.rules import load_rules
from bench.run import RunKind
from bench.store import RunStore
from lab.config import load_inventory
from lab.errors import ConnectionLost
from lab.transport import open_host
from power.check_report import IDENTITY_CHECK, parse_check
from power.official_run import OfficialSetup, execute_official
from tests.support.sntp import SntpServer
from tests.support.targets import provisioned_target
from tests.test_power_dev import ptd_launcher  # noqa: F401  (a fixture)
from tests.test_power_official_campaign import (  # noqa: F401  (ntp is a fixture)
    CHECKOUT,
    needs_checkout,
    ntp,
    official_inventory,
)

pytestmark = pytest.mark.lab
RULES = load_rules("v6.1")


@needs_checkout
def test_a_dropped_link_mid_power_run_is_reattached_not_rerun(
        lab_dir: Path, tmp_path: Path, ptd_launcher: Path,  # noqa: F811
        ntp: SntpServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    inventory = load_inventory(official_inventory(lab_dir, tmp_path, ptd_launcher, ntp))
    target = provisioned_target(inventory, "h2")
    campaign = Campaign.model_validate({"power": "official", "hosts": [{"host": "h2",
                                        "benchmarks": [{"benchmark": "digits",
                                                        "scenarios": ["Offline"]}]}]})
    planned = next(r for r in make_plan(campaign, {"digits": target.manifest}, RULES).runs
                   if r.spec.kind is RunKind.POWER)
    store = RunStore(tmp_path / "store")
    setup = OfficialSetup(CHECKOUT, lock_dir=tmp_path / "locks")
    analyzer = inventory.analyzers[0].name
    waited = remote.wait
    director = open_host(inventory.host("local"))
    serving_at_reattach: list[bool] = []

    def dropped_once(*args: object, **kwargs: object) -> remote.ProcessEnd:
        if not serving_at_reattach:
            serving_at_reattach.append(False)
            time.sleep(8)  # power-dev's client is talking to the server by now
            raise ConnectionLost("link dropped (test)", host="h2", argv=("docker", "wait"))
        (running,) = store.attempts(planned.spec.key)  # reattached, not started again
        server = director.find_detached(f"power-server-{analyzer}")
        serving_at_reattach[0] = running.state == "running" and server is not None \
            and director.poll_detached(server).running
        return waited(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(remote, "wait", dropped_once)
    record = execute_official(target, planned, store, RULES, inventory, analyzer, setup)
    assert serving_at_reattach == [True]  # the drop kept the server serving for the reattach
    assert record.attempt == 1 and record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict.reason
    server = director.find_detached(f"power-server-{analyzer}")
    assert server is not None and not director.poll_detached(server).running  # stopped at end
    report = parse_check((store.path(record.key, 1) / "power_check.txt").read_text())
    assert list(report.failed) == [IDENTITY_CHECK], report
