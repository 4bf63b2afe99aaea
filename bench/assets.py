"""Check, on a host, that a benchmark's datasets and models are there and are the published ones.

Files on mounts are hashed on the host itself (md5sum / sha256sum over our SSH session), files
inside the image in a one-shot container, and the manifest's `verify` command then runs in the
image with the host's read-only mounts. Any problem stops the campaign before a run starts,
with the host, the image and the file named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from bench.manifest import Asset, Manifest
from lab.config import DockerSettings, Mount
from lab.docker import Engine
from lab.errors import ImageError
from lab.host import CommandResult, Host
from lab.image_facts import image_fact


@dataclass(frozen=True)
class AssetCheck:
    """One asset as found on one host."""

    asset: str
    path: str  # where it was hashed (on the host, or inside the image)
    status: str  # "ok", or "absent" for an optional asset that is not there


def verify_assets(host: Host, settings: DockerSettings, manifest: Manifest, image: str,
                  *, timeout_s: float = 3600) -> list[AssetCheck]:
    """Verify every asset's checksum, then run the manifest's verify command in the image."""
    mounts = required_mounts(host.name, settings, manifest)
    checks = [_check(host, settings, manifest, image, asset, timeout_s)
              for asset in manifest.assets]
    argv = manifest.verify_argv()
    if argv:
        result = Engine(host, settings).oneshot(image, argv, timeout_s, check=False,
                                                mounts=mounts)
        if not result.ok:
            raise ImageError(
                f"On host '{host.name}', the dataset/model check of benchmark "
                f"'{manifest.name}' (image '{image}') failed: `{' '.join(argv)}` exited with "
                f"status {result.exit_status}. Fix the mounted files, then start again.\n"
                f"--- last lines of its output ---\n{result.tail(12)}")
    return checks


def host_path(host_name: str, settings: DockerSettings, manifest: Manifest,
              location: str) -> str:
    """The directory on the host that the container sees at the manifest's mount location."""
    target = getattr(manifest.mounts, location)
    for mount in settings.mounts:
        inside = PurePosixPath(target)
        if inside == PurePosixPath(mount.target) or PurePosixPath(mount.target) in inside.parents:
            return str(PurePosixPath(mount.source) / inside.relative_to(mount.target))
    raise ImageError(
        f"Host '{host_name}' mounts nothing at {target}, where benchmark '{manifest.name}' "
        f"expects its {location.replace('_dir', '')} ({{{location}}}). Add to that host in "
        "hosts.yaml: `docker: {mounts: [{source: <directory on the host>, target: "
        f"{target}}}]}}`.")


def required_mounts(host_name: str, settings: DockerSettings, manifest: Manifest) -> list[Mount]:
    """The host's mounts that carry the manifest's dataset and model directories."""
    needed = [t for t in (manifest.mounts.dataset_dir, manifest.mounts.model_dir) if t]
    for location in ("dataset_dir", "model_dir"):
        if getattr(manifest.mounts, location):
            host_path(host_name, settings, manifest, location)  # raises a clear error if absent
    return [m for m in settings.mounts
            if any(PurePosixPath(m.target) == PurePosixPath(t)
                   or PurePosixPath(m.target) in PurePosixPath(t).parents for t in needed)]


def _check(host: Host, settings: DockerSettings, manifest: Manifest, image: str, asset: Asset,
           timeout_s: float) -> AssetCheck:
    argv_tool = f"{asset.algorithm}sum"
    if asset.location == "image":
        path = asset.path
        result = image_fact(Engine(host, settings), image, [argv_tool, path], timeout_s)
    else:
        path = str(PurePosixPath(host_path(host.name, settings, manifest, asset.location))
                   / asset.path)
        result = host.run([argv_tool, path], check=False, timeout_s=timeout_s)
    found = _digest(result)
    if found is None:
        if asset.optional and _absent(result):
            return AssetCheck(asset.name, path, "absent")
        where = f"inside image '{image}'" if asset.location == "image" else "on the host"
        raise ImageError(
            f"On host '{host.name}', {asset.name} for image '{image}' cannot be read at {path} "
            f"({where}): {result.tail(3) or 'no output'}. Put the file there (source: "
            f"{asset.source or 'see the benchmark README'}) or fix the mount in hosts.yaml.")
    if found != asset.digest:
        raise ImageError(
            f"On host '{host.name}', checksum mismatch for {asset.name} of image '{image}': "
            f"{path} has {asset.algorithm} {found}, but the published one is {asset.digest}. "
            "The file is damaged, incomplete or a different version; fetch it again from "
            f"{asset.source or 'its source'} and check it before running.")
    return AssetCheck(asset.name, path, "ok")


def _digest(result: CommandResult) -> str | None:
    words = result.stdout.split()
    return words[0].lower() if result.ok and words else None


def _absent(result: CommandResult) -> bool:
    return "No such file" in result.stderr or "No such file" in result.stdout
