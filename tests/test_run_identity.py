"""Two campaigns that plan the same run (same key) on one host at the same moment: each has its
own container and run folder, named after its campaign, and both runs pass (real lab host h2)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bench.execute import execute
from bench.run import RunKind, RunRecord, Scenario
from bench.store import RunStore
from bench.target import RunTarget
from lab.config import Inventory
from tests.support.targets import provisioned_target
from tests.test_execute import RULES, longer, planned

pytestmark = pytest.mark.lab


def test_same_run_in_two_campaigns_never_clashes(lab_inventory: Inventory,
                                                 tmp_path: Path) -> None:
    targets = [provisioned_target(lab_inventory, "h2", campaign=name)
               for name in ("full", "nightly")]
    run = longer(planned(targets[0], Scenario.OFFLINE, RunKind.PERFORMANCE), 4000)
    records: dict[str, RunRecord] = {}
    errors: list[BaseException] = []

    def campaign(target: RunTarget) -> None:
        try:
            store = RunStore(tmp_path / target.campaign / "store")
            records[target.campaign] = execute(target, run, store, RULES)
        except BaseException as e:  # reported by the test thread below
            errors.append(e)

    threads = [threading.Thread(target=campaign, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors
    full, nightly = records["full"], records["nightly"]
    assert full.key == nightly.key == run.spec.key
    for record in (full, nightly):
        assert record.state == "finished" and record.verdict is not None, record.error
        assert record.verdict.passed, record.verdict.reason
    names = {records[t.campaign].id.name(t.campaign) for t in targets}
    assert names == {f"full-{run.spec.key}-a1", f"nightly-{run.spec.key}-a1"}
    left = targets[0].host.run(["docker", "ps", "-a", "--format", "{{.Names}}"],
                               env=_docker_env(targets[0])).stdout
    # each removed its own container, after collecting it (another worker's campaign may run
    # the same key on h2 meanwhile: its container carries its own campaign's name)
    assert not {f"subrun-{name}" for name in names} & set(left.split()), left
    for target in targets:
        target.host.close()


def _docker_env(target: RunTarget) -> dict[str, str] | None:
    docker_host = target.config.docker.docker_host
    return {"DOCKER_HOST": docker_host} if docker_host else None
