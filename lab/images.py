"""Benchmark images as content: what to build, its wheels, its build context and its tag.

An image is a folder (Dockerfile plus whatever it copies) built FROM either an external base
image or another of our images. Python packages are never fetched inside a build: the wheels
named in the folder's requirements file are downloaded once on the controller into a cache and
put into the build context under `wheels/`. The tag is a hash of everything that goes into the
build — the files, the wheels, the build arguments, and the base (its layers for an external
base, its tag for one of ours) — so an unchanged image has an unchanged tag on every host.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from lab.errors import CommandTimedOut, ImageError
from lab.local import LocalHost

DEFAULT_CACHE = Path(os.environ.get("SUBRUN_CACHE_DIR", Path.home() / ".cache" / "subrun"))
IMAGE_PREFIX = "subrun/"
_SKIP_NAMES = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", "wheels"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".swp", ".md")  # documentation does not change an image
_MANYLINUX = (28, 27, 26, 25, 24, 17)
CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageSpec:
    """How to build one image: its folder, what it is built FROM, and which wheels it needs."""

    name: str  # the folder name; the image is subrun/<name>:<content hash>
    context_dir: Path
    parent: ImageSpec | None = None  # one of ours, built first; its tag becomes BASE_IMAGE
    base_image: str | None = None  # an external image when there is no parent
    requirements: str | None = "requirements.txt"  # in context_dir; pinned, all deps listed
    python: str = "3.11"  # the Python the wheels are for
    build_args: tuple[tuple[str, str], ...] = ()

    @property
    def repository(self) -> str:
        return IMAGE_PREFIX + self.name

    @property
    def chain(self) -> list[ImageSpec]:
        """This image and its parents, root first."""
        return [*(self.parent.chain if self.parent else []), self]

    def with_base(self, base_image: str | None) -> ImageSpec:
        """The same image built on another external base (a host's `docker.base_image`)."""
        if base_image is None:
            return self
        if self.parent is not None:
            return replace(self, parent=self.parent.with_base(base_image))
        return replace(self, base_image=base_image)

    def requirements_path(self) -> Path | None:
        if not self.requirements:
            return None
        path = self.context_dir / self.requirements
        return path if path.is_file() else None


def context_files(spec: ImageSpec) -> list[tuple[str, Path]]:
    """(name in the context, file) for every file of the image's folder, in a stable order."""
    if not (spec.context_dir / "Dockerfile").is_file():
        raise ImageError(f"Image '{spec.name}' has no Dockerfile at {spec.context_dir}/Dockerfile; "
                         "every folder under images/ needs one.")
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(spec.context_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_NAMES)
        for name in sorted(files):
            if name.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(root) / name
            found.append((path.relative_to(spec.context_dir).as_posix(), path))
    return found


def wheel_platforms(architecture: str) -> list[str]:
    """pip's --platform values for an engine architecture (pip does not widen them itself)."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(architecture, architecture)
    return [f"manylinux_2_{minor}_{arch}" for minor in _MANYLINUX] + [f"manylinux2014_{arch}"]


def wheelhouse(spec: ImageSpec, architecture: str, cache_dir: Path = DEFAULT_CACHE) -> Path | None:
    """The folder of wheels for spec's requirements, downloaded once per content and platform."""
    requirements = spec.requirements_path()
    if requirements is None:
        return None
    text = requirements.read_bytes()
    key = hashlib.sha256(text + f"|{spec.python}|{architecture}".encode()).hexdigest()[:16]
    dest = cache_dir / "wheels" / f"{spec.name}-{key}"
    if (dest / ".complete").is_file():
        return dest
    # A private partial folder: hosts provisioned in parallel may fetch the same wheels at once.
    partial = dest.with_name(f"{dest.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    version = spec.python.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--disable-pip-version-check", "--dest", str(partial),
            "--python-version", spec.python, "--implementation", "cp", "--abi", f"cp{version}",
            *(arg for p in wheel_platforms(architecture) for arg in ("--platform", p)),
            "-r", str(requirements)]
    try:
        done = LocalHost("controller", str(cache_dir)).run(argv, check=False, timeout_s=1800)
    except CommandTimedOut as e:
        done = e.result
    if not done.ok:
        tail = done.tail(12)
        raise ImageError(f"Downloading the wheels of image '{spec.name}' on the controller "
                         f"failed ({requirements}, Python {spec.python}, {architecture}). Check "
                         "that every requirement is pinned and has a wheel for that platform, "
                         f"and that the controller reaches the package index.\n{tail}")
    (partial / ".complete").write_text("")
    try:
        partial.rename(dest)
    except OSError:  # another process finished first; its copy is as good as ours
        shutil.rmtree(partial, ignore_errors=True)
    return dest


def wheel_files(wheel_dir: Path | None) -> list[Path]:
    return sorted(wheel_dir.glob("*.whl")) if wheel_dir else []


def content_tag(spec: ImageSpec, base_identity: str, wheel_dir: Path | None) -> str:
    """The tag of spec: a hash of its files, wheels, build arguments and base."""
    digest = hashlib.sha256(b"subrun-image-v1\0")
    digest.update(f"base={base_identity}\0python={spec.python}\0".encode())
    for key, value in spec.build_args:
        digest.update(f"arg {key}={value}\0".encode())
    for name, path in context_files(spec):
        digest.update(f"file {name} {_mode(path):o}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    for wheel in wheel_files(wheel_dir):  # a wheel's name pins its version; its size guards
        digest.update(f"wheel {wheel.name} {wheel.stat().st_size}\0".encode())
    return digest.hexdigest()[:20]


def build_context(spec: ImageSpec, wheel_dir: Path | None) -> bytes:
    """The build context as an uncompressed tar: the folder's files plus wheels/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in context_files(spec):
            _add(tar, name, path.read_bytes(), _mode(path))
        tar.addfile(_dir_info("wheels"))
        for wheel in wheel_files(wheel_dir):
            _add(tar, f"wheels/{wheel.name}", wheel.read_bytes(), 0o644)
    return buffer.getvalue()


def chunks(data: bytes, size: int = CHUNK) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


def build_arguments(spec: ImageSpec, base: str) -> list[str]:
    """The --build-arg flags: BASE_IMAGE plus the image's own."""
    args = ["--build-arg", f"BASE_IMAGE={base}"]
    for key, value in spec.build_args:
        args += ["--build-arg", f"{key}={value}"]
    return args


def find_images_dir(start: Path | None = None) -> Path:
    """The benchmarks' folder: $SUBRUN_IMAGES_DIR when set (a lab's own benchmarks, kept in its
    own repository), else the images/ folder of this checkout."""
    if start is None and os.environ.get("SUBRUN_IMAGES_DIR"):
        return Path(os.environ["SUBRUN_IMAGES_DIR"])
    return (start or Path(__file__).resolve().parent.parent) / "images"


def _mode(path: Path) -> int:
    return 0o755 if os.access(path, os.X_OK) else 0o644


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0  # stable: same content, same tar
    tar.addfile(info, io.BytesIO(data))


def _dir_info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
    return info
