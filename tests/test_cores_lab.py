"""A pinned run on lab host h2 (its real Docker engine, over SSH) has the cores hosts.yaml gives
it: the engine holds the cpuset and the top CPU weight, the process inside sees only those
cores, and the run's telemetry names them as its own.

The lab's own inventory is left as it is: h2 is pinned here in a copy, `cpuset: auto`."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench.execute import execute
from bench.run import RunKind, Scenario
from bench.store import RunStore
from lab import cores
from lab.config import HostConfig, Inventory, load_inventory
from lab.docker import TOP_CPU_SHARES, ContainerSpec, Engine
from lab.host import Host
from lab.transport import open_host
from tests.support.targets import provisioned_target
from tests.test_execute import RULES, longer, planned

pytestmark = pytest.mark.lab
BASE = "subrun/debian:bookworm"


def pinned_inventory(lab_dir: Path, folder: Path) -> Inventory:
    """The lab's inventory with h2's runs pinned (`docker: {cpuset: auto}`)."""
    data = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    h2 = next(h for h in data["hosts"] if h["name"] == "h2")
    h2["docker"] = {**h2["docker"], "cpuset": "auto"}
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_inventory(path)


@pytest.fixture
def h2(lab_dir: Path, tmp_path: Path) -> Iterator[tuple[Host, HostConfig, tuple[int, ...]]]:
    config = pinned_inventory(lab_dir, tmp_path).host("h2")
    config = config.model_copy(update={"work_dir": str(tmp_path / "work")})
    host = open_host(config)
    try:
        expected = cores.auto_cores(cores.host_cores(host))
        if not expected:
            pytest.skip("h2 has one core: `auto` pins nothing there")
        yield host, config, expected
    finally:
        host.close()


def test_a_pinned_container_runs_on_its_cores_alone(
        h2: tuple[Host, HostConfig, tuple[int, ...]], tmp_path: Path) -> None:
    host, config, expected = h2
    engine = Engine(host, config.docker)
    key = f"cores-{uuid.uuid4().hex[:10]}"
    spec = ContainerSpec(image=BASE, argv=("grep", "Cpus_allowed_list", "/proc/self/status"),
                         run_key=key, run_dir=f"{config.work_dir}/runs/{key}",
                         run_mount="/subrun/run")
    container = engine.start(spec)
    try:
        status = engine.wait(container, timeout_s=60)
        assert not status.running and status.exit_status == 0, engine.logs(container)
        inside = engine.logs(container).split(":", 1)[1].strip()
        found = json.loads(engine.docker(
            ["inspect", "--format", "{{json .HostConfig}}", container.id],
            what="inspecting the pinned container").stdout)
    finally:
        engine.remove(container)
    assert inside == cores.core_list(expected)
    assert found["CpusetCpus"] == cores.core_list(expected)
    assert found["CpuShares"] == TOP_CPU_SHARES


def test_a_pinned_runs_telemetry_names_its_own_cores(lab_inventory: Inventory, lab_dir: Path,
                                                     tmp_path: Path) -> None:
    config = pinned_inventory(lab_dir, tmp_path).host("h2")
    target = provisioned_target(lab_inventory, "h2", campaign=f"cores-{uuid.uuid4().hex[:6]}")
    target = dataclasses.replace(target, config=config)
    expected = cores.auto_cores(cores.host_cores(target.host))
    if not expected:
        pytest.skip("h2 has one core: `auto` pins nothing there")
    store = RunStore(tmp_path / "store")
    record = execute(target, longer(planned(target, Scenario.OFFLINE, RunKind.PERFORMANCE), 4000),
                     store, RULES)
    assert record.state == "finished", record.error
    assert record.telemetry is not None
    print("pinned run:", record.telemetry.model_dump_json())
    assert record.telemetry.own_cores == cores.core_list(expected)
