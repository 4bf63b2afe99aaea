"""The shipped benchmark images, built and run for real: digits (the demo) and resnet50."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import pytest

from bench.assets import verify_assets
from bench.manifest import Manifest, load_manifest
from bench.run import RUN_MOUNT, RunKind, Scenario
from lab.config import Inventory, Mount
from lab.docker import ContainerSpec, Engine
from lab.errors import ImageError
from lab.provision import ProvisionResult, provision
from testkit import tiny_resnet
from tests.support.lab_images import OFFLINE, lab_engine
from tests.support.targets import OFFLINE_ABOVE_REACH_QPS

pytestmark = pytest.mark.lab

ACCURACY_LINE = re.compile(r"^accuracy=(\d+\.\d{3})%, good=(\d+), total=(\d+)$")
SHORT = {  # quick but complete LoadGen runs
    Scenario.OFFLINE: (f"*.Offline.target_qps = {OFFLINE_ABOVE_REACH_QPS}\n"
                       "*.Offline.min_duration = 1000\n"),
    Scenario.SINGLE_STREAM: ("*.SingleStream.target_latency = 0.05\n"
                             "*.SingleStream.min_duration = 500\n"
                             "*.SingleStream.min_query_count = 64\n"),
}


def run_in(engine: Engine, image: str, manifest: Manifest, scenario: Scenario, kind: RunKind,
           run_dir: str) -> str:
    """One run of manifest's image on engine's host; returns the container's output."""
    engine.host.makedirs(f"{run_dir}/output")
    engine.host.run(["sh", "-c", 'printf "%s" "$1" > "$0/user.conf"', run_dir, SHORT[scenario]])
    key = "t" + uuid.uuid4().hex[:15]
    spec = ContainerSpec(image=image, argv=tuple(manifest.run_argv(scenario, kind)), run_key=key,
                         run_dir=run_dir, run_mount=RUN_MOUNT)
    container = engine.start(spec)
    try:
        status = engine.wait(container, timeout_s=300)
        logs = engine.logs(container)
        assert status.exit_status == 0, logs[-3000:]
    finally:
        engine.remove(container)
    return logs


def score_in(engine: Engine, image: str, manifest: Manifest, run_dir: str) -> str:
    """Run the manifest's score command over run_dir; returns accuracy.txt."""
    run_mount = Mount(source=run_dir, target=RUN_MOUNT, read_only=False)
    engine.oneshot(image, manifest.score_argv(), 300,
                mounts=[*engine.settings.mounts, run_mount])
    return engine.host.read_text(f"{run_dir}/output/accuracy.txt")


# --- digits, the demo -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits() -> Manifest:
    return load_manifest("digits")


@pytest.fixture(scope="module")
def digits_h2(lab_inventory: Inventory, digits: Manifest) -> tuple[Engine, ProvisionResult]:
    engine = lab_engine(lab_inventory, "h2")
    return engine, provision(engine, digits.image_spec(), options=OFFLINE)


def test_demo_offline_run_over_ssh(digits_h2: tuple[Engine, ProvisionResult],
                                   digits: Manifest, tmp_path: Path) -> None:
    engine, provisioned = digits_h2
    assert provisioned.image_id.startswith("sha256:")
    checks = verify_assets(engine.host, engine.settings, digits, provisioned.image)
    assert [c.status for c in checks] == ["ok"]
    run_dir = str(tmp_path / "run")
    logs = run_in(engine, provisioned.image, digits, Scenario.OFFLINE, RunKind.PERFORMANCE,
                  run_dir)
    assert "Result is : VALID" in logs
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        assert engine.host.exists(f"{run_dir}/output/{name}")
    detail = engine.host.read_text(f"{run_dir}/output/mlperf_log_detail.txt")
    assert '"key": "effective_performance_sample_count", "value": 1024' in detail
    assert '"key": "qsl_reported_total_count", "value": 50000' in detail


def test_demo_unchanged_reprovision_is_quick(digits_h2: tuple[Engine, ProvisionResult],
                                             digits: Manifest) -> None:
    engine, first = digits_h2
    again = provision(engine, digits.image_spec(), options=OFFLINE)
    assert again.unchanged and again.bytes_sent == 0 and again.image_id == first.image_id
    assert again.duration_s < 2.0


def test_demo_ships_to_offline_host(lab_inventory: Inventory, digits: Manifest) -> None:
    """With the demo's tag taken off h3 (its layers kept under a spare tag, so the link
    carries little), provisioning ships it, then finds it unchanged."""
    h3, controller = lab_engine(lab_inventory, "h3"), lab_engine(lab_inventory, "local")
    present = provision(h3, digits.image_spec(), controller=controller, options=OFFLINE)
    spare = f"subrun/test-keep:{uuid.uuid4().hex[:12]}"
    h3.docker(["image", "tag", present.image, spare], what="keeping the demo's layers")
    try:
        h3.docker(["image", "rm", present.image], what="taking the demo's tag off")
        assert h3.image_id(present.image) is None
        first = provision(h3, digits.image_spec(), controller=controller, options=OFFLINE)
        assert first.shipped and not first.built and first.bytes_sent > 0
        assert h3.image_id(first.image) == controller.image_id(first.image) == first.image_id
        assert (first.image, first.image_id) == (present.image, present.image_id)
        again = provision(h3, digits.image_spec(), controller=controller, options=OFFLINE)
        assert again.unchanged and not again.shipped and again.bytes_sent == 0
        assert again.duration_s < 2.0
    finally:
        h3.docker(["image", "rm", spare], what="removing the spare tag")


def test_demo_accuracy_run_covers_50000_samples(lab_inventory: Inventory, digits: Manifest,
                                                tmp_path: Path) -> None:
    local = lab_engine(lab_inventory, "local")
    image = provision(local, digits.image_spec(), options=OFFLINE).image
    run_dir = str(tmp_path / "run")
    run_in(local, image, digits, Scenario.OFFLINE, RunKind.ACCURACY, run_dir)
    text = score_in(local, image, digits, run_dir)
    first, second = text.splitlines()
    match = ACCURACY_LINE.match(first)
    assert match and int(match.group(3)) == 50000 and float(match.group(1)) > 90.0
    log = Path(run_dir, "output", "mlperf_log_accuracy.json").read_bytes()
    assert second == f"hash={hashlib.sha256(log).hexdigest()}"


# --- resnet50 with a tiny model of the same signature ------------------------------------------

@pytest.fixture(scope="module")
def resnet_lab(lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[Engine, str, Manifest, int]:
    """The resnet50 image on the controller, the tiny model and dataset mounted read-only."""
    root = tmp_path_factory.mktemp("resnet")
    md5 = tiny_resnet.write_model(root / "model" / "resnet50_v1.onnx")
    right = tiny_resnet.write_dataset(root / "imagenet")
    manifest = load_manifest("resnet50")
    mounts = [Mount(source=str(root / "imagenet"), target=str(manifest.mounts.dataset_dir)),
              Mount(source=str(root / "model"), target=str(manifest.mounts.model_dir))]
    engine = lab_engine(lab_inventory, "local", mounts=mounts)
    image = provision(engine, manifest.image_spec(), options=OFFLINE).image
    tiny = [a.model_copy(update={"checksum": f"md5:{md5}"}) if a.location == "model_dir" else a
            for a in manifest.assets]
    return engine, image, manifest.model_copy(update={"assets": tiny}), right


def test_resnet50_verifies_dataset_and_tiny_model(resnet_lab: tuple[Engine, str, Manifest, int]
                                                   ) -> None:
    engine, image, tiny_manifest, _ = resnet_lab
    checks = verify_assets(engine.host, engine.settings, tiny_manifest, image)
    assert {c.asset: c.status for c in checks} == {
        "ResNet50-v1.5 ONNX model (opset 11)": "ok", "ImageNet 2012 validation archive": "absent"}


def test_resnet50_checksum_mismatch_names_host_and_image(
        resnet_lab: tuple[Engine, str, Manifest, int]) -> None:
    engine, image, _, _ = resnet_lab
    with pytest.raises(ImageError) as caught:
        verify_assets(engine.host, engine.settings, load_manifest("resnet50"), image)
    message = str(caught.value)
    assert "checksum mismatch" in message and "host 'local'" in message and image in message
    assert "f6a4da60cd5f084d97efc2c1ddb10beb" in message


def test_resnet50_verify_step_catches_a_missing_image(
        resnet_lab: tuple[Engine, str, Manifest, int], tmp_path: Path) -> None:
    engine, image, manifest, _ = resnet_lab
    broken = tmp_path / "imagenet"
    broken.mkdir()
    (broken / "val_map.txt").write_text("ILSVRC2012_val_00000001.JPEG 3\n")
    mounts = [m if m.target != manifest.mounts.dataset_dir else
              m.model_copy(update={"source": str(broken)}) for m in engine.settings.mounts]
    settings = engine.settings.model_copy(update={"mounts": mounts})
    no_checksums = manifest.model_copy(update={"assets": []})
    with pytest.raises(ImageError, match=r"(?s)host 'local'.*resnet50.*1 of 1 images"):
        verify_assets(engine.host, settings, no_checksums, image)


def test_resnet50_missing_mount_is_explained(resnet_lab: tuple[Engine, str, Manifest, int]
                                             ) -> None:
    engine, image, manifest, _ = resnet_lab
    bare = engine.settings.model_copy(update={"mounts": []})
    with pytest.raises(ImageError, match=r"Host 'local' mounts nothing at /subrun/data/imagenet"):
        verify_assets(engine.host, bare, manifest, image)


def test_resnet50_accuracy_run_with_tiny_model(resnet_lab: tuple[Engine, str, Manifest, int],
                                               tmp_path: Path) -> None:
    engine, image, manifest, right = resnet_lab
    run_dir = str(tmp_path / "run")
    run_in(engine, image, manifest, Scenario.OFFLINE, RunKind.ACCURACY, run_dir)
    text = score_in(engine, image, manifest, run_dir)
    match = ACCURACY_LINE.match(text.splitlines()[0])
    assert match is not None
    assert (int(match.group(2)), int(match.group(3))) == (right, 48)
    assert text.splitlines()[1].startswith("hash=")


def test_resnet50_single_stream_performance_run(resnet_lab: tuple[Engine, str, Manifest, int],
                                                tmp_path: Path) -> None:
    engine, image, manifest, _ = resnet_lab
    run_dir = str(tmp_path / "run")
    logs = run_in(engine, image, manifest, Scenario.SINGLE_STREAM, RunKind.PERFORMANCE, run_dir)
    assert "Scenario : SingleStream" in logs and "Result is : VALID" in logs
    assert Path(run_dir, "output", "mlperf_log_detail.txt").is_file()
