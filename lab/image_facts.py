"""Answers of commands that read only an image, kept on the controller by the image's ID.

An image never changes under its ID, so a command that reads nothing but the image (the software
probe, the checksum of a file inside it) prints the same every time it runs there. Kept, it is
answered without starting a container: a one-shot container costs about 0.3 s, and a campaign
started two of them per host before its first run. Only a command that succeeded, with its whole
output, is kept; a command with mounts reads the host's files and is never asked here. The key
holds the host, the image ID, the command and the engine's GPU flags, so another image, probe
or device set is asked again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lab.docker import Engine
from lab.host import CommandResult
from lab.images import DEFAULT_CACHE


def image_fact(engine: Engine, image: str, argv: Sequence[str], timeout_s: float,
               cache_dir: Path = DEFAULT_CACHE) -> CommandResult:
    """argv's result in a one-shot container of image (mounting nothing), kept or fresh; a
    failure is returned as it came (never kept), an engine fault raised as by oneshot."""
    image_id = engine.image_id(image)
    if image_id is None:  # not there: oneshot says so in the engine's own words
        return engine.oneshot(image, argv, timeout_s, check=False)
    path = kept_path(cache_dir, engine.host.name, image_id, argv, engine.settings.gpus)
    kept = _read(path)
    if kept is not None:
        return CommandResult(engine.host.name, tuple(argv), 0, kept["stdout"], kept["stderr"],
                             0.0)
    result = engine.oneshot(image, argv, timeout_s, check=False)
    if result.ok and not result.truncated:
        _write(path, {"image": image, "image_id": image_id, "argv": list(argv),
                      "stdout": result.stdout, "stderr": result.stderr})
    return result


def kept_path(cache_dir: Path, host: str, image_id: str, argv: Sequence[str],
              gpus: object) -> Path:
    """Where the answer of argv in image_id on host is kept."""
    key = json.dumps([host, image_id, list(argv), gpus], sort_keys=True, default=str)
    return cache_dir / "image-facts" / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def _read(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # none kept, or a damaged file: ask the image again
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str)
                                             for k in ("stdout", "stderr")):
        return None
    return data


def _write(path: Path, data: dict[str, object]) -> None:
    """Whole or not at all: another campaign may read it at the same moment."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False,
                                         suffix=".tmp") as f:
            json.dump(data, f)
    except OSError:  # a cache that cannot be written only costs the next campaign a container
        return
    try:
        os.replace(f.name, path)
    except OSError:
        Path(f.name).unlink(missing_ok=True)
