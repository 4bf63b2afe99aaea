"""Put a benchmark image on a host: build it there, or build it here and ship it over SSH.

`provision` first works out the image's content tag and asks the host's engine for it; an
image that is already there is neither rebuilt nor re-sent. Otherwise a `build` host gets the
build context streamed to `docker build -` on its own engine, and a `ship` host (one with no
network) gets the image built once on the controller and streamed through `docker save | docker
load` over the SSH link, without the layers it already holds (see `lab.ship`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import re
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lab.docker import LABEL_MANAGED, Engine, engine_error, engine_fault
from lab.errors import ImageError
from lab.images import (
    DEFAULT_CACHE,
    ImageSpec,
    build_arguments,
    build_context,
    chunks,
    content_tag,
    wheelhouse,
)

log = logging.getLogger("subrun.docker")
LABEL_IMAGE = "org.subrun.image"
LABEL_CONTENT = "org.subrun.content"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the classic builder colours its output


@dataclass(frozen=True)
class ProvisionOptions:
    """How provisioning behaves; the defaults suit real labs."""

    cache_dir: Path = DEFAULT_CACHE
    pull_base: bool = True  # pull a missing external base image (labs with a registry)
    reserve_mb: int = 1024  # free space to leave on the engine's disk beyond the image itself
    build_timeout_s: float = 3600.0
    transfer_timeout_s: float = 3600.0
    log_tail_lines: int = 25
    no_cache: bool = False  # build every layer afresh (docker build --no-cache)


@dataclass(frozen=True)
class ProvisionResult:
    """What provisioning left on one host, and what it cost."""

    host: str
    image: str  # repository:tag, the reference to start containers from
    image_id: str  # the engine's image ID (sha256:...), recorded with every run
    built: list[str] = field(default_factory=list)  # images built on this host by this call
    shipped: bool = False  # streamed from the controller by this call
    bytes_sent: int = 0  # build contexts and image archives sent to the host
    duration_s: float = 0.0

    @property
    def unchanged(self) -> bool:
        return not self.built and not self.shipped


def provision(
    engine: Engine,
    spec: ImageSpec,
    *,
    controller: Engine | None = None,
    options: ProvisionOptions | None = None,
) -> ProvisionResult:
    """Make spec's image present on engine's host, the way its hosts.yaml entry asks."""
    options = options or ProvisionOptions()
    started = time.monotonic()
    engine.require(f"provisioning image '{spec.repository}'")
    for step in spec.chain:
        if not (step.context_dir / "Dockerfile").is_file():
            raise ImageError(f"Cannot provision image '{step.repository}' on host "
                             f"'{engine.host.name}': there is no Dockerfile at "
                             f"{step.context_dir / 'Dockerfile'}. Every folder under images/ "
                             "needs one.")
    if engine.settings.provision == "ship":
        if controller is None:
            raise ImageError(f"Host '{engine.host.name}' is marked `provision: ship`, but no "
                             "controller engine was given to build the image on.")
        from lab.ship import ship

        result = ship(controller, engine, spec, options)
    else:
        result = build_on(engine, spec.with_base(engine.settings.base_image), options)
    return _timed(result, started)


def build_on(engine: Engine, spec: ImageSpec, options: ProvisionOptions) -> ProvisionResult:
    """Build spec and its parents on engine's own Docker engine, skipping what is there."""
    steps: list[tuple[ImageSpec, str, str]] = []  # (image, its ref, what it builds FROM)
    ref = ""
    for step in spec.chain:
        base = ref if step.parent is not None else _external_base(engine, step, options)
        ref = f"{step.repository}:{image_tag(engine, step, options, base_ref=base)}"
        steps.append((step, ref, base))
    present = engine.image_id(ref)
    if present is not None:  # the usual case: one question to the engine, nothing to do
        return ProvisionResult(engine.host.name, ref, present)
    built: list[str] = []
    sent = 0
    for step, step_ref, base in steps:
        if engine.image_id(step_ref) is not None:
            continue
        with build_lock(options.cache_dir, engine.host.name, step_ref):
            if engine.image_id(step_ref) is None:  # not built meanwhile by a parallel provision
                sent += _build(engine, step, step_ref, base, options)
                built.append(step_ref)
    image_id = engine.image_id(ref)
    if image_id is None:
        raise ImageError(f"On host '{engine.host.name}', image '{ref}' is missing right after "
                         "it was built; another process may have removed it. Provision again.")
    return ProvisionResult(engine.host.name, ref, image_id, built=built, bytes_sent=sent)


@contextmanager
def build_lock(cache_dir: Path, host: str, ref: str) -> Iterator[None]:
    """One builder of ref per host at a time, across threads and processes of this controller.

    Two builds of the same tag would give two image IDs, the second silently replacing the
    first under runs that already recorded it.
    """
    folder = cache_dir / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{host}-{ref}")
    with open(folder / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def image_tag(engine: Engine, spec: ImageSpec, options: ProvisionOptions,
              *, base_ref: str | None = None) -> str:
    """spec's content tag for images built by engine (the base identity comes from it)."""
    if spec.parent is not None:
        parent_ref = base_ref or image_ref(engine, spec.parent, options)
        identity = parent_ref
    else:
        base = base_ref or _external_base(engine, spec, options)
        identity = f"{base}@{','.join(_layers(engine, base))}"
    wheels = wheelhouse(spec, engine.architecture(), options.cache_dir)
    return content_tag(spec, identity, wheels)


def image_ref(engine: Engine, spec: ImageSpec, options: ProvisionOptions) -> str:
    """repository:tag of spec as engine would build it."""
    return f"{spec.repository}:{image_tag(engine, spec, options)}"


def _external_base(engine: Engine, spec: ImageSpec, options: ProvisionOptions) -> str:
    base = spec.base_image
    if not base:
        raise ImageError(f"Image '{spec.name}' names neither a parent image nor a base image; "
                         "set `build.base_image` in its benchmark.yaml.")
    if engine.image_id(base) is not None:
        return base
    if options.pull_base:
        result = engine.host.run(["docker", "pull", base], check=False, env=engine.env,
                                 timeout_s=options.build_timeout_s)
        if result.ok:
            return base
        if engine_fault(result):
            raise engine_error(result, f"pulling base image '{base}'")
    raise ImageError(
        f"On host '{engine.host.name}', the base image '{base}' of image '{spec.repository}' is "
        "unknown: the engine does not have it" + (" and cannot pull it" if options.pull_base
                                                  else " and pulling is off") +
        ". Load it into that engine (`docker load` or `docker import`), or set "
        f"`docker: {{base_image: ...}}` for host '{engine.host.name}' in hosts.yaml to an image "
        "it has (with python3 and python3-venv).")


def _layers(engine: Engine, ref: str) -> list[str]:
    result = engine.docker(["image", "inspect", "--format", "{{json .RootFS.Layers}}", ref],
                           what=f"reading the layers of '{ref}'")
    return list(json.loads(result.stdout))


def _build(engine: Engine, spec: ImageSpec, ref: str, base: str,
           options: ProvisionOptions) -> int:
    """docker build on the engine with the context streamed on stdin; the bytes sent."""
    wheels = wheelhouse(spec, engine.architecture(), options.cache_dir)
    context = build_context(spec, wheels)
    ensure_disk_space(engine, ref, needed_bytes=3 * len(context), options=options)
    tail: deque[str] = deque(maxlen=options.log_tail_lines)

    def show(line: str) -> None:
        line = _ANSI.sub("", line)
        tail.append(line)
        log.info("[%s build %s] %s", engine.host.name, spec.name, line)

    tag = ref.rsplit(":", 1)[1]
    args = ["build", "--network", "none", *(["--no-cache"] if options.no_cache else []),
            "--tag", ref, "--label", f"{LABEL_MANAGED}=1",
            "--label", f"{LABEL_IMAGE}={spec.name}", "--label", f"{LABEL_CONTENT}={tag}",
            *build_arguments(spec, base), "-"]
    log.info("[%s] building %s (%d bytes of context)", engine.host.name, ref, len(context))
    result = engine.host.run(["docker", *args], check=False, env=engine.env,
                             stdin=chunks(context), on_output=show,
                             timeout_s=options.build_timeout_s)
    if not result.ok:
        if engine_fault(result):
            raise engine_error(result, f"building image '{ref}'")
        shown = "\n".join(tail)
        raise ImageError(f"On host '{engine.host.name}', building image '{ref}' from "
                         f"{spec.context_dir} failed (exit status {result.exit_status}). Last "
                         f"lines of the build log:\n{shown}")
    return len(context)


def ensure_disk_space(engine: Engine, ref: str, *, needed_bytes: int,
                      options: ProvisionOptions) -> None:
    """Refuse early, naming host and image, when the engine's disk cannot take the image."""
    root = engine.docker(["info", "--format", "{{.DockerRootDir}}"], what="docker info")
    free = engine.host.free_bytes(root.stdout.strip())
    if free is None:
        log.warning("[%s] cannot read free space of %s; not checked", engine.host.name,
                    root.stdout.strip())
        return
    needed = needed_bytes + options.reserve_mb * 1024 * 1024
    if free < needed:
        raise ImageError(
            f"On host '{engine.host.name}', there is not enough disk space for image '{ref}': "
            f"{free / 2**20:.0f} MiB free under {root.stdout.strip()}, about "
            f"{needed / 2**20:.0f} MiB needed. Free space there (`docker image prune`, remove "
            "old images), then provision again.")


def _timed(result: ProvisionResult, started: float) -> ProvisionResult:
    from dataclasses import replace

    return replace(result, duration_s=time.monotonic() - started)
