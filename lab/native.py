"""Native environments: a benchmark's harness and wheels in a venv on a host without Docker.

What an image would hold is sent instead as one tar stream over the host's SSH session: the
build context of every image in the benchmark's chain (its harness code) under `src/<image>/`,
and the wheels of the controller's cache under `wheels/`. On the host a venv is made from its
own Python (`python -m venv`), the wheels installed with `pip install --no-index`, each context
put on the venv's path (as `/opt/subrun` is in the image), and the image's build-time steps run
with the image paths they use mapped to folders of the environment.

An environment lives in `<work_dir>/native/<benchmark>-<tag>/`, the tag a hash of everything it
is made from (code, wheels, setup steps, path map, the interpreter), and is marked complete last:
an unchanged environment is found by one `test -e` and neither re-sent nor rebuilt; a half-made
one (a dropped link, a crash) is removed and made again.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import tarfile
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lab.errors import ImageError
from lab.host import Host
from lab.images import ImageSpec, chunks, content_tag, context_files, wheel_files, wheelhouse
from lab.interpreter import (
    Interpreter,
    check_interpreter,
    incompatible_wheels,
    probe_interpreter,
)
from lab.provision import ProvisionOptions, ProvisionResult, build_lock

log = logging.getLogger("subrun.native")
VENV, SOURCES, WHEELS, MARKER = "venv", "src", "wheels", ".complete"
RESERVED = frozenset({VENV, SOURCES, WHEELS, MARKER})
# Enter the environment: its venv first on PATH (so `python` in an argv template is the venv's),
# the Python settings the images set in their Dockerfiles, and none of the login's own.
_ENTER = ('unset PYTHONPATH PYTHONHOME PYTHONSTARTUP; '
          'export PATH="$0/venv/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1; '
          'exec "$@"')
_PTH = ("import sys, sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], "
        "'subrun.pth').write_text(''.join(p + '\\n' for p in sys.argv[1:]))")


@dataclass(frozen=True)
class NativeSpec:
    """What a native environment is made from: an image chain, its setup steps and path map."""

    image: ImageSpec  # the benchmark's image; its chain gives the code and the wheels
    setup: tuple[tuple[str, ...], ...] = ()  # argv run once in the environment, image paths
    paths: tuple[tuple[str, str], ...] = ()  # image path -> folder of the environment
    host_paths: tuple[tuple[str, str], ...] = ()  # container mount path -> directory on the host

    @property
    def name(self) -> str:
        return self.image.name


def env_dir(work_dir: str, spec: NativeSpec, tag: str) -> str:
    """Where the environment of spec with tag lives on a host."""
    return str(PurePosixPath(work_dir) / "native" / f"{spec.name}-{tag}")


def env_python(environment: str) -> str:
    """The venv's interpreter in an environment."""
    return f"{environment}/{VENV}/bin/python"


def in_env(environment: str, argv: Sequence[str]) -> list[str]:
    """argv run inside the environment (its venv on PATH), argv itself unquoted, unchanged."""
    return ["sh", "-c", _ENTER, environment, *argv]


def path_map(environment: str, spec: NativeSpec) -> dict[str, str]:
    """Image and mount paths -> where they are natively."""
    mapping = dict(spec.host_paths)
    mapping.update({image: f"{environment}/{folder}" for image, folder in spec.paths})
    return mapping


def map_paths(argv: Sequence[str], mapping: Mapping[str, str]) -> list[str]:
    """argv with every mapped path (whole path components only) replaced by its native place."""
    if not mapping:
        return list(argv)
    keys = sorted(mapping, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(k.rstrip("/")) for k in keys)
                         + r")(?=/|$|[^\w.-])")
    table = {k.rstrip("/"): v.rstrip("/") for k, v in mapping.items()}
    return [pattern.sub(lambda m: table[m.group(1)], element) for element in argv]


def native_tag(spec: NativeSpec, interpreter: Interpreter, wheel_dirs: Sequence[Path | None]
               ) -> str:
    """The content hash of an environment: code, wheels, setup, paths and the interpreter."""
    digest = hashlib.sha256(b"subrun-native-v1\0")
    digest.update(f"{interpreter.executable}\0{interpreter.version}\0{interpreter.machine}\0"
                  .encode())
    identity = "native"
    for step, wheels in zip(spec.image.chain, wheel_dirs, strict=True):
        identity = content_tag(step, identity, wheels)
    digest.update(f"chain={identity}\0".encode())
    for argv in spec.setup:
        digest.update(("setup " + "\0".join(argv) + "\0\0").encode())
    for key, value in (*spec.paths, *spec.host_paths):
        digest.update(f"path {key}={value}\0".encode())
    return digest.hexdigest()[:20]


def provision_native(host: Host, spec: NativeSpec, *, python: str = "python3",
                     options: ProvisionOptions | None = None) -> ProvisionResult:
    """Make spec's environment present on host (built from its `python`); an unchanged one is
    found and left as it is. The result's image is the environment's directory."""
    options = options or ProvisionOptions()
    started = time.monotonic()
    interpreter = probe_interpreter(host, python, spec.name)
    check_interpreter(interpreter, spec.image.python, host.name, spec.name)
    wheel_dirs = [_wheels(step, interpreter, host.name, spec.name, options)
                  for step in spec.image.chain]
    misfits = incompatible_wheels([w for d in wheel_dirs for w in wheel_files(d)], interpreter)
    if misfits:
        raise ImageError(
            f"Host '{host.name}' runs {interpreter.described}; these wheels of benchmark "
            f"'{spec.name}' from the controller's cache do not fit it: {', '.join(misfits)}. "
            "They were made for another architecture, C library or Python; remove that cache "
            f"folder ({options.cache_dir / 'wheels'}) so they are fetched again for this host.")
    tag = native_tag(spec, interpreter, wheel_dirs)
    environment = env_dir(host.work_dir, spec, tag)
    ref = f"native:{spec.name}-{tag}"
    built: list[str] = []
    sent = 0
    if not host.exists(f"{environment}/{MARKER}"):
        with build_lock(options.cache_dir, host.name, ref):
            if not host.exists(f"{environment}/{MARKER}"):  # not made meanwhile in parallel
                sent = _make(host, spec, interpreter, environment, wheel_dirs, options)
                built.append(ref)
    return ProvisionResult(host.name, environment, ref, built=built, shipped=bool(built),
                           bytes_sent=sent, duration_s=time.monotonic() - started)


def _wheels(step: ImageSpec, interpreter: Interpreter, host: str, benchmark: str,
            options: ProvisionOptions) -> Path | None:
    try:
        return wheelhouse(step, interpreter.machine, options.cache_dir)
    except ImageError as e:
        raise ImageError(f"Host '{host}' runs {interpreter.described}; the controller could not "
                         f"get the wheels of benchmark '{benchmark}' for that platform, so it "
                         f"cannot run natively there. {e}") from e


def _make(host: Host, spec: NativeSpec, interpreter: Interpreter, environment: str,
          wheel_dirs: Sequence[Path | None], options: ProvisionOptions) -> int:
    """Send, install and set up the environment; the bytes sent."""
    archive = native_archive(spec, wheel_dirs)
    _ensure_space(host, spec, needed_bytes=4 * len(archive), options=options)
    log.info("[%s] making native environment %s (%d bytes)", host.name, environment,
             len(archive))
    host.run(["rm", "-rf", environment], timeout_s=300)
    host.makedirs(environment)
    host.run(["tar", "-x", "-f", "-", "-C", environment], stdin=chunks(archive),
             timeout_s=options.transfer_timeout_s)
    _step(host, spec, "making its venv", [interpreter.executable, "-m", "venv",
                                          f"{environment}/{VENV}"], options)
    requirements = [arg for step in spec.image.chain if step.requirements_path()
                    for arg in ("-r", f"{environment}/{SOURCES}/{step.name}/{step.requirements}")]
    if requirements:
        _step(host, spec, "installing its wheels", [
            env_python(environment), "-m", "pip", "--isolated", "install", "--no-index",
            "--no-deps",
            "--no-cache-dir", "--disable-pip-version-check", "--find-links",
            f"{environment}/{WHEELS}", *requirements], options, interpreter=interpreter)
    host.run([env_python(environment), "-c", _PTH,
              *(f"{environment}/{SOURCES}/{step.name}" for step in spec.image.chain)],
             timeout_s=60)
    for _, folder in spec.paths:
        host.makedirs(f"{environment}/{folder}")
    mapping = path_map(environment, spec)
    for argv in spec.setup:
        _step(host, spec, f"its setup step `{' '.join(argv)}`",
              in_env(environment, map_paths(argv, mapping)), options, cwd=environment)
    host.run(["rm", "-rf", f"{environment}/{WHEELS}"], timeout_s=120)  # installed: not needed
    host.run(["sh", "-c", 'echo "$1" > "$0"', f"{environment}/{MARKER}", spec.name],
             timeout_s=30)  # last: only a whole environment is ever marked complete
    return len(archive)


def _step(host: Host, spec: NativeSpec, what: str, argv: list[str], options: ProvisionOptions,
          *, cwd: str | None = None, interpreter: Interpreter | None = None) -> None:
    tail: deque[str] = deque(maxlen=options.log_tail_lines)

    def show(line: str) -> None:
        tail.append(line)
        log.info("[%s native %s] %s", host.name, spec.name, line)

    result = host.run(argv, check=False, cwd=cwd, on_output=show,
                      timeout_s=options.build_timeout_s)
    if result.ok:
        return
    shown = "\n".join(tail) or result.tail(options.log_tail_lines)
    text = result.stdout + result.stderr
    hint = "Fix the cause shown below, then provision again."
    if "ensurepip" in text:
        hint = ("Its Python lacks venv support: install python3-venv (Debian/Ubuntu), then "
                "provision again.")
    elif interpreter is not None and "not a supported wheel" in text:
        hint = (f"A wheel does not fit the host's {interpreter.described}; the wheels are "
                "fetched for the architecture and Python the host reports.")
    raise ImageError(f"On host '{host.name}', making the native environment of benchmark "
                     f"'{spec.name}' failed while {what} (exit status {result.exit_status}). "
                     f"{hint}\n--- last lines of its output ---\n{shown}")


def native_archive(spec: NativeSpec, wheel_dirs: Sequence[Path | None]) -> bytes:
    """The environment's files as an uncompressed tar: src/<image>/... and wheels/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for step in spec.image.chain:
            for name, path in context_files(step):
                _add(tar, f"{SOURCES}/{step.name}/{name}", path)
        for wheels in wheel_dirs:
            for wheel in wheel_files(wheels):
                _add(tar, f"{WHEELS}/{wheel.name}", wheel)
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, path: Path) -> None:
    data = path.read_bytes()
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 0
    info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
    tar.addfile(info, io.BytesIO(data))


def _ensure_space(host: Host, spec: NativeSpec, *, needed_bytes: int,
                  options: ProvisionOptions) -> None:
    host.makedirs(host.work_dir)
    free = host.free_bytes(host.work_dir)
    if free is None:
        log.warning("[%s] cannot read free space of %s; not checked", host.name, host.work_dir)
        return
    needed = needed_bytes + options.reserve_mb * 1024 * 1024
    if free < needed:
        raise ImageError(
            f"On host '{host.name}', there is not enough disk space for the native environment "
            f"of benchmark '{spec.name}': {free / 2**20:.0f} MiB free under {host.work_dir}, "
            f"about {needed / 2**20:.0f} MiB needed. Free space there (old environments under "
            f"{host.work_dir}/native can go), then provision again.")
