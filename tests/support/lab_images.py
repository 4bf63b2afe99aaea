"""Engines of the test lab for image tests, and small throwaway images that always build fresh.

The lab's engines have no registry, so every host builds from `subrun/debian:bookworm` (as a
real offline lab sets `docker: {base_image: ...}` in hosts.yaml) and pulling is off. Throwaway
images get a unique name per test and are removed by exact tag afterwards; the benchmark images
(subrun/base, subrun/digits, subrun/resnet50) stay as the lab's build cache.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.config import HostConfig, Inventory
from lab.docker import Engine
from lab.images import ImageSpec
from lab.provision import ProvisionOptions
from lab.transport import open_host

LAB_BASE = "subrun/debian:bookworm"
OFFLINE = ProvisionOptions(pull_base=False)


def lab_config(inventory: Inventory, name: str, **docker: object) -> HostConfig:
    """A lab host's entry, building from the lab's base image, with docker settings changed."""
    config = inventory.host(name)
    settings = config.docker.model_copy(update={"base_image": LAB_BASE, **docker})
    return config.model_copy(update={"docker": settings})


def lab_engine(inventory: Inventory, name: str, **docker: object) -> Engine:
    config = lab_config(inventory, name, **docker)
    return Engine(open_host(config), config.docker)


def throwaway_spec(folder: Path, *, dockerfile: str | None = None) -> ImageSpec:
    """A tiny image with a unique name and content: its first provision always builds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "marker.txt").write_text(uuid.uuid4().hex)
    (folder / "Dockerfile").write_text(dockerfile or (
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY marker.txt /marker.txt\n"
        "RUN echo built > /built.txt\n"))
    return ImageSpec(f"test-{uuid.uuid4().hex[:10]}", folder, base_image=LAB_BASE,
                     requirements=None)


@contextmanager
def removed_afterwards(spec: ImageSpec, *engines: Engine) -> Iterator[None]:
    """Remove every tag of spec's repository from engines when the block ends."""
    try:
        yield
    finally:
        for engine in engines:
            listed = engine.docker(["image", "ls", "--format", "{{.Repository}}:{{.Tag}}",
                                    spec.repository], what="listing test images").stdout.split()
            if listed:
                engine.docker(["image", "rm", "--force", *listed], what="removing test images")
