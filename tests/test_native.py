"""Native runs on a host without Docker: h2 of the test lab with `docker: {engine: false}`.

The host entry is a copy of h2 (same sshd, real SSH) with its own work_dir and Debian's
/usr/bin/python3, so nothing of the lab's own h2 is touched. The campaign steps the flow calls
(provision, describe, run) run against it, then the fault cases: a Python without venv support,
a missing interpreter, and wheels of the wrong architecture in the controller's cache.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bench import target as remote
from bench.campaign import Campaign
from bench.execute import execute, run_files
from bench.manifest import load_manifest
from bench.native import native_spec, process_name, provision
from bench.plan import PlannedRun
from bench.run import RunKind
from bench.target import RunTarget, remote_run_dir
from flows import steps
from flows.context import CampaignContext, load_context
from lab.config import HostConfig, Inventory
from lab.errors import ImageError
from lab.images import DEFAULT_CACHE, wheelhouse
from lab.provision import ProvisionOptions, ProvisionResult
from lab.transport import open_host
from tests.support.targets import OFFLINE_ABOVE_REACH_QPS

pytestmark = pytest.mark.lab
HOST = "h2-native"


def native_copy(inventory: Inventory, work_dir: Path, python: str = "/usr/bin/python3"
                ) -> HostConfig:
    """h2 as an edge device without Docker: its own name and work_dir, Debian's Python, and
    h2's cores (its runs start under taskset)."""
    h2 = inventory.host("h2")
    return h2.model_copy(update={
        "name": HOST, "work_dir": str(work_dir),
        "docker": h2.docker.model_copy(update={"engine": False, "cpuset": None}),
        "native": h2.native.model_copy(update={"python": python, "cpuset": h2.docker.cpuset})})


@pytest.fixture(scope="module")
def edge(lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[CampaignContext, dict[str, ProvisionResult]]]:
    """A campaign on the engine-false copy of h2, its digits environment provisioned once."""
    root = tmp_path_factory.mktemp("edge")
    config = native_copy(lab_inventory, root / "work")
    inventory = lab_inventory.model_copy(update={"hosts": [*lab_inventory.hosts, config]})
    (root / "hosts.yaml").write_text(yaml.safe_dump(inventory.model_dump(mode="json")))
    campaign = Campaign.model_validate({
        "name": "edge", "inventory": str(root / "hosts.yaml"), "output_dir": str(root / "out"),
        "compliance": False,
        "hosts": [{"host": HOST, "benchmarks": [{"benchmark": "digits",
                                                 "scenarios": ["Offline"]}]}]})
    ctx = load_context(campaign)
    try:
        first = steps.provision_host(ctx, HOST)
        steps.bind_images(ctx, {HOST: first}, "6.0.17")
        yield ctx, first
    finally:
        ctx.close()


def planned(ctx: CampaignContext, kind: RunKind) -> PlannedRun:
    return next(r for r in ctx.plan.runs if r.spec.kind is kind)


def target_of(ctx: CampaignContext, images: dict[str, ProvisionResult]) -> RunTarget:
    result = images["digits"]
    return RunTarget(ctx.host(HOST), ctx.inventory.host(HOST), ctx.manifests["digits"],
                     result.image, result.image_id, ctx.campaign.name)


def test_environment_is_made_once_and_an_unchanged_one_sends_nothing(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, first = edge
    made = first["digits"]
    assert made.built and made.bytes_sent > 10_000_000  # code plus the wheels
    host = ctx.host(HOST)
    assert made.image.startswith(f"{ctx.inventory.host(HOST).work_dir}/native/digits-")
    assert host.exists(f"{made.image}/model/digits-mlp.pkl")  # the Dockerfile's training step
    assert not host.exists(f"{made.image}/wheels")
    again = steps.provision_host(ctx, HOST)["digits"]
    assert again.unchanged and again.bytes_sent == 0
    assert (again.image, again.image_id) == (made.image, made.image_id)
    assert again.duration_s < 2.0


def test_describe_reads_the_environment_natively(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, images = edge
    description = steps.describe(ctx, HOST, images)
    stack = str(description.system["other_software_stack"])
    assert "mlcommons-loadgen 6.0.17" in stack and "Python 3.11" in stack
    assert "NumPy 2.4.6" in str(description.system["framework"])


def test_native_offline_performance_run_is_valid_and_never_repeated(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, images = edge
    run = planned(ctx, RunKind.PERFORMANCE)
    record = steps.run(ctx, run, images)
    assert record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict
    assert record.spec.image_digest == images["digits"].image_id
    assert {"user.conf", "output/mlperf_log_detail.txt",
            "output/mlperf_log_summary.txt"} <= set(record.files)
    assert "audit.config" not in record.files
    folder = ctx.store.path(record.key, record.attempt)
    summary = (folder / "output" / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary
    host = ctx.host(HOST)
    target = target_of(ctx, images)
    assert not host.exists(remote_run_dir(target, record.id.name(target.campaign)))
    assert not host.exists(host.detached_dir(process_name(record.id.name(target.campaign))))
    again = steps.run(ctx, run, images)
    assert (again.attempt, again.finished_at) == (record.attempt, record.finished_at)


def test_native_accuracy_run_passes(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, images = edge
    record = steps.run(ctx, planned(ctx, RunKind.ACCURACY), images)
    assert record.state == "finished", record.error
    assert record.verdict is not None and record.verdict.passed, record.verdict
    folder = ctx.store.path(record.key, record.attempt)
    accuracy = (folder / "output" / "accuracy.txt").read_text()
    assert "accuracy=" in accuracy and "total=50000" in accuracy


def test_reattach_after_the_controller_forgets(
        edge: tuple[CampaignContext, dict[str, ProvisionResult]]) -> None:
    ctx, images = edge
    target = target_of(ctx, images)
    base = planned(ctx, RunKind.PERFORMANCE)
    settings = {**base.spec.settings, "*.Offline.min_duration": 2000,
                "*.Offline.target_qps": OFFLINE_ABOVE_REACH_QPS}
    run = PlannedRun(base.spec.model_copy(update={"settings": settings}), base.estimate_s)
    record = ctx.store.start_attempt(run.spec)  # a controller started the run, then died
    started = remote.start(target, record, run_files(run.spec, ctx.rules))
    found = remote.find(target, record)
    assert found is not None and found.process == started.process
    finished = execute(target, run, ctx.store, ctx.rules)
    assert (finished.attempt, finished.state) == (1, "finished"), finished.error
    assert finished.verdict is not None and finished.verdict.passed
    assert len(ctx.store.attempts(run.spec.key)) == 1
    assert ctx.store.verify(finished.key, 1) == []
    assert remote.find(target, finished) is None  # collected, then removed from the host


def test_python_without_venv_support_is_refused_naming_host_and_benchmark(
        lab_inventory: Inventory, tmp_path: Path) -> None:
    # Debian's python3 without the python3-venv package: no ensurepip module
    shadow = tmp_path / "shadow" / "ensurepip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named "
                                        "'ensurepip'\", name='ensurepip')\n")
    fake = tmp_path / "python3-without-venv"
    fake.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'shadow'} exec /usr/bin/python3 "
                    "\"$@\"\n")
    fake.chmod(0o755)
    config = native_copy(lab_inventory, tmp_path / "work", python=str(fake))
    with open_host(config) as host, pytest.raises(ImageError) as caught:
        provision(host, config, load_manifest("digits"))
    message = str(caught.value)
    assert f"Host '{HOST}'" in message and "'digits'" in message
    assert "python3-venv" in message
    assert not (tmp_path / "work" / "native").exists()  # refused before anything was sent


def test_wheels_of_another_architecture_are_refused_before_anything_is_sent(
        lab_inventory: Inventory, tmp_path: Path) -> None:
    config = native_copy(lab_inventory, tmp_path / "work")
    manifest = load_manifest("digits")
    cache = tmp_path / "cache"
    for step in native_spec(manifest, config).image.chain:  # the controller's cached wheels
        source = wheelhouse(step, "x86_64", DEFAULT_CACHE)
        assert source is not None
        shutil.copytree(source, cache / "wheels" / source.name)
    numpy = next((cache / "wheels").glob("*/numpy-*.whl"))
    numpy.rename(numpy.with_name(numpy.name.replace("x86_64", "aarch64")))  # a wrong cache
    with open_host(config) as host, pytest.raises(ImageError) as caught:
        provision(host, config, manifest, ProvisionOptions(cache_dir=cache))
    message = str(caught.value)
    assert f"Host '{HOST}' runs Python 3.11" in message and "on x86_64" in message
    assert "'digits'" in message and "aarch64.whl" in message
    assert not (tmp_path / "work" / "native").exists()
