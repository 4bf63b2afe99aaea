"""Copy one attempt's run directory from its target, which is not trusted.

The container (or native process) of a run writes whatever it likes into its run directory, and
the target's `find` may print whatever it likes. So every listed name is checked before anything
is written: it must be a plain relative path inside the run directory (no `..`, no absolute
path), name a regular file (a symlink or device is refused, never followed on either side), and
land, once resolved, inside the local attempt folder. The listing is NUL-separated, so a name
with a newline is just a name. The count and total size of the files are capped. Anything else
refuses the whole collection with `CollectionRefused`: a final failure of the run, naming the
path, that no retry can fix. Only a dropped link (ConnectError, ConnectionLost) stays transient.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path, PurePosixPath

from bench.store import RUN_JSON
from lab.config import Limits
from lab.errors import CollectionRefused, TransferFailed
from lab.host import Host

# Files first, then (after a marker no `find .` line can be, as every one starts with "./")
# whatever is neither a file nor a directory: symlinks, fifos, sockets, devices.
_LISTING = r"""cd "$1" || exit 3
find . -type f -print0
printf 'subrun:not-regular\0'
find . ! -type f ! -type d -print0
"""
_MARKER = "subrun:not-regular"
_SHOWN = 5  # offending names quoted in a refusal
_NAME_MAX, _PATH_MAX = 255, 4000  # bytes: longer names cannot be written locally


@dataclass(frozen=True)
class Collected:
    """What one collection copied."""

    files: int
    bytes: int


def collect_dir(host: Host, run_dir: str, local_dir: Path, limits: Limits) -> Collected:
    """Copy the regular files under run_dir on host into local_dir, or refuse them all."""
    names = list_files(host, run_dir, limits)
    root = Path(local_dir).resolve()
    budget = int(limits.collect_max_bytes)
    total = 0
    for name in names:
        local = destination(root, name, host.name, run_dir)
        remote = str(PurePosixPath(run_dir) / name)
        try:
            total += host.get(remote, local, max_bytes=budget - total)
        except TransferFailed as e:
            raise _refused(host, run_dir, f"'{name}' could not be collected: {e}",
                           "the total size cap is `limits.collect_max_bytes`"
                           f" ({budget} bytes) in hosts.yaml") from e
    return Collected(len(names), total)


def list_files(host: Host, run_dir: str, limits: Limits) -> list[str]:
    """The names (relative to run_dir) of the regular files to collect, all checked."""
    result = host.run(["sh", "-c", _LISTING, "sh", run_dir], check=False, timeout_s=120)
    if not result.ok or result.truncated:
        why = (f"its listing was longer than the {host.output_cap_bytes} bytes kept"
               if result.truncated else f"listing it exited with status {result.exit_status}: "
               f"{result.tail(3)!r}")
        raise _refused(host, run_dir, why, "look at the run directory on the target")
    return parse_listing(result.stdout, host.name, run_dir, limits)


def parse_listing(text: str, host: str, run_dir: str, limits: Limits) -> list[str]:
    """The checked names of a NUL-separated listing of files, marker, then non-regular
    entries; anything malformed or pointing outside the run directory is refused."""
    records = text.split("\0")
    if records[-1] != "" or records.count(_MARKER) != 1:
        raise _refused_at(host, run_dir, "its listing is malformed (not NUL-terminated, or "
                          "not one section marker)", "check that `find` on the target "
                          "supports -print0")
    cut = records.index(_MARKER)
    files, others = records[:cut], records[cut + 1:-1]
    if others:
        raise _refused_at(host, run_dir, f"it holds {len(others)} symlink(s) or special "
                          f"file(s), which are never collected: {_quote(others)}",
                          "write only regular files into the run's folder")
    if len(files) > limits.collect_max_files:
        raise _refused_at(host, run_dir, f"it holds {len(files)} files, more than the "
                          f"{limits.collect_max_files} collected at most", "raise "
                          "`limits.collect_max_files` in hosts.yaml if the benchmark really "
                          "writes that many")
    bad = [f for f in files if not _plain(f)]
    if bad:
        raise _refused_at(host, run_dir, "its listing names path(s) outside the run's folder "
                          f"or not plain: {_quote(bad)}", "a run writes only below its own "
                          "folder")
    names = sorted(f[2:] for f in files)
    if RUN_JSON in names:  # the store's record of the attempt: a run never writes it
        raise _refused_at(host, run_dir, f"it holds '{RUN_JSON}', the name the run store keeps "
                          "for its own record of the attempt", "a run writes its files below "
                          "its output folder")
    twice = [a for a, b in pairwise(names) if a == b]
    if twice:
        raise _refused_at(host, run_dir, f"its listing names files twice: {_quote(twice)}")
    return names


def destination(root: Path, name: str, host: str, run_dir: str) -> Path:
    """Where name goes under root (an absolute, resolved folder), checked after resolving
    symlinks; the folders on the way are created, the file itself must not exist yet."""
    local = root / name
    try:
        local.parent.mkdir(parents=True, exist_ok=True)
        inside = local.parent.resolve(strict=True).is_relative_to(root)
    except OSError as e:
        raise _refused_at(host, run_dir, f"'{name}' has no place in the attempt folder: "
                          f"{e.strerror or e}") from e
    if not inside or os.path.lexists(local):
        raise _refused_at(host, run_dir, f"'{name}' would be written to {local}, which is "
                          f"{'outside the attempt folder' if not inside else 'already taken'}")
    return local


def _plain(listed: str) -> bool:
    """A `find .` line naming something strictly below the run directory, without detours."""
    if not listed.startswith("./") or "\ufffd" in listed or len(listed.encode()) > _PATH_MAX:
        return False
    parts = listed[2:].split("/")
    return all(p not in ("", ".", "..") and len(p.encode()) <= _NAME_MAX for p in parts)


def _quote(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _refused(host: Host, run_dir: str, why: str, fix: str) -> CollectionRefused:
    return _refused_at(host.name, run_dir, why, fix)


def _refused_at(host: str, run_dir: str, why: str, fix: str = "") -> CollectionRefused:
    advice = f" To fix: {fix}." if fix else ""
    return CollectionRefused(
        f"Collecting run directory {run_dir} from host '{host}' was refused: {why}. Nothing "
        f"outside the attempt's folder was written, and the run is failed for good, not retried "
        f"(the target is not trusted to decide what the controller writes).{advice}")
