"""Ship an image built on the controller to a host with no network: `docker save | docker load`.

The controller saves the image once into its cache; each host then gets that archive streamed
over its SSH session into `docker load`, minus the layers it already holds. `docker load` does
not read a layer it already has (it looks the layer up by chain ID first), so leaving those
files out of the archive is safe, and an image whose base is already on the host costs only its
own layers. Should a host refuse the thinned archive, the full one is sent once.
"""

from __future__ import annotations

import json
import logging
import os
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from lab.docker import Engine
from lab.errors import ImageError
from lab.images import CHUNK, ImageSpec
from lab.local import LocalHost
from lab.provision import (
    ProvisionOptions,
    ProvisionResult,
    build_lock,
    build_on,
    ensure_disk_space,
    image_ref,
)

log = logging.getLogger("subrun.docker")


def ship(controller: Engine, target: Engine, spec: ImageSpec,
         options: ProvisionOptions) -> ProvisionResult:
    """Build spec on the controller (if needed) and stream it to target (if it lacks it)."""
    spec = spec.with_base(controller.settings.base_image)
    ref = image_ref(controller, spec, options)
    arch, target_arch = controller.architecture(), target.architecture()
    if arch != target_arch:
        raise ImageError(f"Image '{ref}' is built on the controller for {arch}, but host "
                         f"'{target.host.name}' is {target_arch}; set `provision: build` for it "
                         "or ship from a controller of the same architecture.")
    present_id = target.image_id(ref)
    if present_id is not None:
        return ProvisionResult(target.host.name, ref, present_id)
    built = build_on(controller, spec, options)
    with build_lock(options.cache_dir, controller.host.name, f"{ref}.tar"):
        archive = saved_archive(controller, ref, options.cache_dir, image_id=built.image_id)
    ensure_disk_space(target, ref, needed_bytes=2 * archive.stat().st_size, options=options)
    with build_lock(options.cache_dir, target.host.name, ref):
        if target.image_id(ref) == built.image_id:  # a parallel provision shipped it
            return ProvisionResult(target.host.name, ref, built.image_id)
        sent = _load(target, ref, archive, options)
    loaded_id = target.image_id(ref)
    if loaded_id != built.image_id:
        raise ImageError(f"After shipping, host '{target.host.name}' holds image '{ref}' as "
                         f"{loaded_id}, not {built.image_id} as on the controller. Remove it "
                         "there and provision again.")
    return ProvisionResult(target.host.name, ref, built.image_id, shipped=True, bytes_sent=sent)


def saved_archive(controller: Engine, ref: str, cache_dir: Path,
                  *, image_id: str | None = None) -> Path:
    """The controller's `docker save` of ref, made once (per image ID) and kept in the cache."""
    if not isinstance(controller.host, LocalHost):
        raise ImageError(f"Images are shipped from the controller, this machine; host "
                         f"'{controller.host.name}' is not local. Give the `transport: local` "
                         "host as the controller.")
    repository, tag = ref.rsplit(":", 1)
    folder = cache_dir / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{repository.replace('/', '_')}-{tag}.tar"
    if archive.is_file() and (image_id is None or archive_image_id(archive) == image_id):
        return archive
    # A private partial file: hosts shipped to in parallel may ask for the same archive.
    partial = archive.with_name(f"{archive.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    controller.docker(["save", "--output", str(partial), ref], what=f"saving image '{ref}'",
                      timeout_s=3600)
    partial.replace(archive)
    for old in folder.glob(f"{repository.replace('/', '_')}-*.tar"):
        if old != archive:  # one archive per image name is enough; they are large
            old.unlink(missing_ok=True)
    return archive


def archive_image_id(archive: Path) -> str:
    """The image ID a saved archive holds: the digest its config file is named by."""
    with tarfile.open(archive, "r:") as tar:
        config = json.load(_member(tar, "manifest.json"))[0]["Config"]
    return "sha256:" + PurePosixPath(config).name.removesuffix(".json")


def present_chains(engine: Engine) -> set[tuple[str, ...]]:
    """Every layer chain (as diff IDs, root first) the engine's images are made of."""
    ids = engine.docker(["image", "ls", "--all", "--quiet", "--no-trunc"],
                        what="listing images").stdout.split()
    if not ids:
        return set()
    result = engine.docker(["image", "inspect", "--format", "{{json .RootFS.Layers}}",
                            *sorted(set(ids))], what="reading image layers", ok_if_missing=True)
    chains: set[tuple[str, ...]] = set()
    for line in result.stdout.splitlines():
        layers = json.loads(line) if line.strip() else []
        chains.update(tuple(layers[:i + 1]) for i in range(len(layers)))
    return chains


def skippable_layers(archive: Path, present: set[tuple[str, ...]]) -> set[str]:
    """Names of the layer files in archive whose layer the target already holds."""
    with tarfile.open(archive, "r:") as tar:
        manifest = json.load(_member(tar, "manifest.json"))[0]
        config = json.load(_member(tar, manifest["Config"]))
    diff_ids = config["rootfs"]["diff_ids"]
    return {path for i, path in enumerate(manifest["Layers"])
            if tuple(diff_ids[:i + 1]) in present}


def archive_stream(archive: Path, skip: set[str], counter: list[int]) -> Iterator[bytes]:
    """The archive as tar bytes without the members named in skip; counter[0] adds up sent bytes."""
    with tarfile.open(archive, "r:") as tar:
        members = tar.getmembers()
    with archive.open("rb") as raw:
        for member in members:
            if member.name in skip:
                continue
            header = member.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
            counter[0] += len(header)
            yield header
            raw.seek(member.offset_data)
            left = member.size if member.isreg() else 0
            while left:
                chunk = raw.read(min(CHUNK, left))
                if not chunk:
                    raise ImageError(f"The saved image {archive} ends early; delete it and "
                                     "provision again.")
                left -= len(chunk)
                counter[0] += len(chunk)
                yield chunk
            if member.isreg() and member.size % 512:
                pad = b"\0" * (512 - member.size % 512)
                counter[0] += len(pad)
                yield pad
    counter[0] += 1024
    yield b"\0" * 1024


def _load(target: Engine, ref: str, archive: Path, options: ProvisionOptions) -> int:
    """Stream archive into `docker load` on target; the bytes sent (both tries)."""
    skip = skippable_layers(archive, present_chains(target))
    counter = [0]
    log.info("[%s] shipping %s (%d of its layers already there)", target.host.name, ref,
             len(skip))
    result = target.host.run(["docker", "load"], check=False, env=target.env,
                             stdin=archive_stream(archive, skip, counter),
                             timeout_s=options.transfer_timeout_s)
    if result.ok:
        return counter[0]
    if not skip:
        from lab.docker import engine_error

        raise engine_error(result, f"loading image '{ref}'")
    log.warning("[%s] docker load refused the archive without shared layers (%s); sending "
                "the whole image", target.host.name, result.tail(3))
    full = [0]
    target.docker(["load"], what=f"loading image '{ref}'", stdin=archive_stream(archive, set(),
                                                                                 full),
                  timeout_s=options.transfer_timeout_s)
    return counter[0] + full[0]


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    handle = tar.extractfile(name)
    if handle is None:
        raise ImageError(f"The saved image {tar.name!r} has no {name}; delete it and provision "
                         "again.")
    return handle
