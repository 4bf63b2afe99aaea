"""Provisioning images on the lab's real engines over real SSH: build on h2, ship to h3, errors."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from bench.manifest import list_benchmarks, load_manifest
from lab.config import Inventory
from lab.errors import ConfigError, ImageError
from lab.images import build_context, content_tag, find_images_dir, wheel_platforms
from lab.provision import ProvisionOptions, provision
from lab.ship import saved_archive
from tests.support.lab_images import (
    OFFLINE,
    lab_engine,
    removed_afterwards,
    throwaway_spec,
)

# --- pure: tags, contexts, platforms -----------------------------------------------------


def test_content_tag_follows_content_and_base(tmp_path: Path) -> None:
    spec = throwaway_spec(tmp_path / "img")
    tag = content_tag(spec, "base@sha256:1", None)
    assert tag == content_tag(spec, "base@sha256:1", None)
    assert tag != content_tag(spec, "base@sha256:2", None)
    (tmp_path / "img" / "marker.txt").write_text("changed")
    assert tag != content_tag(spec, "base@sha256:1", None)
    (tmp_path / "img" / "__pycache__").mkdir()
    (tmp_path / "img" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    changed = content_tag(spec, "base@sha256:1", None)
    assert changed == content_tag(spec, "base@sha256:1", None)  # caches do not count


def test_build_context_is_stable_and_carries_wheels(tmp_path: Path) -> None:
    spec = throwaway_spec(tmp_path / "img")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "demo-1.0-py3-none-any.whl").write_bytes(b"PK")
    first = build_context(spec, wheels)
    assert first == build_context(spec, wheels)
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert names == ["Dockerfile", "marker.txt", "wheels", "wheels/demo-1.0-py3-none-any.whl"]


def test_benchmarks_come_from_subrun_images_dir_when_set(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = find_images_dir()
    own = tmp_path / "our-benchmarks"
    (own / "digits").mkdir(parents=True)
    text = (shipped / "digits" / "benchmark.yaml").read_text()
    (own / "digits" / "benchmark.yaml").write_text(
        text.replace("dataset_size: 50000", "dataset_size: 4000"))
    monkeypatch.setenv("SUBRUN_IMAGES_DIR", str(own))
    assert find_images_dir() == own and list_benchmarks() == ["digits"]
    assert load_manifest("digits").dataset_size == 4000
    with pytest.raises(ConfigError, match=r"No benchmark 'resnet50'.*\$SUBRUN_IMAGES_DIR"):
        load_manifest("resnet50")
    monkeypatch.delenv("SUBRUN_IMAGES_DIR")
    assert find_images_dir() == shipped and load_manifest("digits").dataset_size == 50000


def test_wheel_platforms_widen_manylinux() -> None:
    platforms = wheel_platforms("x86_64")
    assert "manylinux_2_28_x86_64" in platforms and "manylinux2014_x86_64" in platforms
    assert wheel_platforms("arm64")[0].endswith("_aarch64")


# --- real engines ----------------------------------------------------------------------------


@pytest.mark.lab
def test_build_on_target_then_unchanged(lab_inventory: Inventory, tmp_path: Path) -> None:
    h2 = lab_engine(lab_inventory, "h2")
    spec = throwaway_spec(tmp_path / "img")
    with removed_afterwards(spec, h2):
        first = provision(h2, spec, options=OFFLINE)
        assert first.built == [first.image] and not first.shipped
        assert first.image.startswith(f"{spec.repository}:") and first.bytes_sent > 0
        assert h2.image_id(first.image) == first.image_id
        probe = h2.host.run(["docker", "run", "--rm", "--network", "none", first.image,
                             "cat", "/built.txt"], env=h2.env)
        assert probe.stdout == "built\n"
        again = provision(h2, spec, options=OFFLINE)
        assert again.unchanged and again.bytes_sent == 0
        assert (again.image, again.image_id) == (first.image, first.image_id)
        assert again.duration_s < 2.0


@pytest.mark.lab
def test_ship_to_offline_host_sends_only_new_layers(lab_inventory: Inventory,
                                                    tmp_path: Path) -> None:
    h3 = lab_engine(lab_inventory, "h3")
    controller = lab_engine(lab_inventory, "local")
    assert h3.settings.provision == "ship"
    spec = throwaway_spec(tmp_path / "img")
    options = ProvisionOptions(pull_base=False, cache_dir=tmp_path / "cache")
    with removed_afterwards(spec, h3, controller):
        first = provision(h3, spec, controller=controller, options=options)
        assert first.shipped and not first.built
        assert h3.image_id(first.image) == first.image_id == controller.image_id(first.image)
        archive = saved_archive(controller, first.image, options.cache_dir)
        # the base (~220 MB) is already on h3: only the image's own small layers cross the wire
        assert 0 < first.bytes_sent < archive.stat().st_size / 20
        probe = h3.host.run(["docker", "run", "--rm", "--network", "none", first.image,
                             "cat", "/built.txt"], env=h3.env)
        assert probe.stdout == "built\n"
        again = provision(h3, spec, controller=controller, options=options)
        assert again.unchanged and again.bytes_sent == 0 and again.image_id == first.image_id
        assert again.duration_s < 2.0


@pytest.mark.lab
def test_failed_build_carries_the_end_of_its_log(lab_inventory: Inventory,
                                                  tmp_path: Path) -> None:
    h2 = lab_engine(lab_inventory, "h2")
    spec = throwaway_spec(tmp_path / "img", dockerfile=(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"
        "RUN echo the-reason-it-broke && exit 3\n"))
    with removed_afterwards(spec, h2), pytest.raises(ImageError) as caught:
        provision(h2, spec, options=OFFLINE)
    message = str(caught.value)
    assert "host 'h2'" in message and spec.repository in message
    assert "the-reason-it-broke" in message and "Last lines of the build log" in message


@pytest.mark.lab
def test_unknown_base_image_names_host_and_image(lab_inventory: Inventory,
                                                 tmp_path: Path) -> None:
    h2 = lab_engine(lab_inventory, "h2", base_image="subrun/no-such-base:1")
    spec = throwaway_spec(tmp_path / "img")
    with pytest.raises(ImageError) as caught:
        provision(h2, spec, options=OFFLINE)
    message = str(caught.value)
    assert "host 'h2'" in message and "subrun/no-such-base:1" in message
    assert spec.repository in message and "unknown" in message


@pytest.mark.lab
def test_no_engine_on_target(lab_inventory: Inventory, tmp_path: Path) -> None:
    spec = throwaway_spec(tmp_path / "img")
    gone = lab_engine(lab_inventory, "h2", docker_host="unix:///nonexistent/docker.sock")
    with pytest.raises(ImageError, match="On host 'h2', no Docker engine answers"):
        provision(gone, spec, options=OFFLINE)


@pytest.mark.lab
def test_refused_thin_archive_falls_back_to_the_whole_image(
        lab_inventory: Inventory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: subrun wrongly believes h3 holds every layer, so it sends none."""
    import lab.ship

    h3 = lab_engine(lab_inventory, "h3")
    controller = lab_engine(lab_inventory, "local")
    spec = throwaway_spec(tmp_path / "img")
    options = ProvisionOptions(pull_base=False, cache_dir=tmp_path / "cache")
    with removed_afterwards(spec, h3, controller):
        built = provision(controller, spec, options=options)
        layers = json.loads(controller.docker(
            ["image", "inspect", "--format", "{{json .RootFS.Layers}}", built.image],
            what="layers").stdout)
        wrong = {tuple(layers[:i + 1]) for i in range(len(layers))}
        monkeypatch.setattr(lab.ship, "present_chains", lambda engine: wrong)
        shipped = provision(h3, spec, controller=controller, options=options)
        archive = saved_archive(controller, shipped.image, options.cache_dir)
        assert shipped.shipped and h3.image_id(shipped.image) == built.image_id
        assert shipped.bytes_sent > archive.stat().st_size  # the thin try, then the whole


@pytest.mark.lab
def test_parallel_ships_share_one_controller(lab_inventory: Inventory, tmp_path: Path) -> None:
    """Hosts of a campaign provision in parallel; both ship the same new image at once."""
    from concurrent.futures import ThreadPoolExecutor

    targets = [lab_engine(lab_inventory, "h2", provision="ship"), lab_engine(lab_inventory, "h3")]
    controllers = [lab_engine(lab_inventory, "local") for _ in targets]
    spec = throwaway_spec(tmp_path / "img")
    options = ProvisionOptions(pull_base=False, cache_dir=tmp_path / "cache")
    with removed_afterwards(spec, *targets, controllers[0]), ThreadPoolExecutor(2) as pool:
        results = list(pool.map(
            lambda pair: provision(pair[0], spec, controller=pair[1], options=options),
            zip(targets, controllers, strict=True)))
        assert [r.shipped for r in results] == [True, True]
        assert results[0].image_id == results[1].image_id
        assert [t.image_id(results[0].image) for t in targets] == [results[0].image_id] * 2
        assert sorted(p.name for p in (tmp_path / "cache" / "archives").iterdir()) == [
            f"subrun_{spec.name}-{results[0].image.rsplit(':', 1)[1]}.tar"]
