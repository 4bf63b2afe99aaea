"""Provisioning decisions over a FakeHost engine: what is asked, built or refused, and why.

The real builds, ships and engine errors are in test_images.py (lab); here only the choices
`lab.provision` makes from the engine's answers, with no Docker and no root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.config import DockerSettings
from lab.docker import Engine
from lab.errors import ImageError
from lab.images import ImageSpec
from lab.provision import ProvisionOptions, image_ref, provision
from testkit.fake_docker import FakeEngine
from testkit.fake_host import FakeHost
from tests.support.lab_images import LAB_BASE, throwaway_spec


@pytest.fixture
def options(tmp_path: Path) -> ProvisionOptions:
    return ProvisionOptions(cache_dir=tmp_path / "cache", pull_base=False)


def fake_engine(fake: FakeEngine, name: str = "h2", **docker: object) -> Engine:
    settings = DockerSettings.model_validate({"base_image": LAB_BASE, **docker})
    return Engine(fake.install(FakeHost(name)), settings)


def builds(engine: Engine) -> list[tuple[str, ...]]:
    assert isinstance(engine.host, FakeHost)
    return [c for c in engine.host.commands() if c[:2] == ("docker", "build")]


def test_an_image_already_there_is_neither_built_nor_sent(tmp_path: Path,
                                                          options: ProvisionOptions) -> None:
    fake = FakeEngine()
    fake.add(LAB_BASE)
    engine = fake_engine(fake)
    spec = throwaway_spec(tmp_path / "img")
    ref = image_ref(engine, spec, options)
    image_id = fake.add(ref)
    result = provision(engine, spec, options=options)
    assert result.unchanged and result.image == ref and result.image_id == image_id
    assert result.bytes_sent == 0 and builds(engine) == []


def test_a_missing_image_is_built_once_from_its_context(tmp_path: Path,
                                                        options: ProvisionOptions) -> None:
    fake = FakeEngine()
    fake.add(LAB_BASE)
    engine = fake_engine(fake)
    spec = throwaway_spec(tmp_path / "img")
    result = provision(engine, spec, options=options)
    assert result.built == [result.image] and [ref for ref, _ in fake.builds] == [result.image]
    assert result.bytes_sent == fake.builds[0][1] > 0
    [build] = builds(engine)
    assert build[2:4] == ("--network", "none") and f"BASE_IMAGE={LAB_BASE}" in build
    assert provision(engine, spec, options=options).unchanged  # and never again


def test_unknown_base_is_refused_naming_host_image_and_base(tmp_path: Path,
                                                            options: ProvisionOptions) -> None:
    engine = fake_engine(FakeEngine())
    spec = throwaway_spec(tmp_path / "img")
    with pytest.raises(ImageError) as caught:
        provision(engine, spec, options=options)
    message = str(caught.value)
    assert "host 'h2'" in message and LAB_BASE in message and spec.repository in message
    assert "pulling is off" in message and builds(engine) == []


def test_no_disk_space_is_refused_before_building(tmp_path: Path,
                                                  options: ProvisionOptions) -> None:
    fake = FakeEngine()
    fake.add(LAB_BASE)
    engine = fake_engine(fake)
    assert isinstance(engine.host, FakeHost)
    engine.host.free_bytes_value = 512 * 2**20  # less than the 1024 MiB reserve
    spec = throwaway_spec(tmp_path / "img")
    with pytest.raises(ImageError) as caught:
        provision(engine, spec, options=ProvisionOptions(cache_dir=tmp_path, pull_base=False))
    message = str(caught.value)
    assert "host 'h2'" in message and spec.repository in message
    assert "not enough disk space" in message and "512 MiB free under /var/lib/docker" in message
    assert builds(engine) == [] and fake.builds == []


def test_missing_dockerfile_names_host_and_image(tmp_path: Path,
                                                 options: ProvisionOptions) -> None:
    engine = fake_engine(FakeEngine())
    (tmp_path / "empty").mkdir()
    spec = ImageSpec("nodockerfile", tmp_path / "empty", base_image=LAB_BASE, requirements=None)
    with pytest.raises(ImageError, match=r"subrun/nodockerfile.*host 'h2'.*no Dockerfile"):
        provision(engine, spec, options=options)
    assert isinstance(engine.host, FakeHost) and engine.host.commands() == []


def test_a_host_without_engine_is_refused_before_any_command(tmp_path: Path,
                                                             options: ProvisionOptions) -> None:
    engine = fake_engine(FakeEngine(), "h3", engine=False)
    with pytest.raises(ImageError, match=r"Host 'h3' has `docker: \{engine: false\}`"):
        provision(engine, throwaway_spec(tmp_path / "img"), options=options)
    assert isinstance(engine.host, FakeHost) and engine.host.commands() == []
