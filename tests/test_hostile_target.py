"""Collection from a target that lies: a paramiko SSH server on loopback crafts the listing
and serves any path it is asked for. Nothing may land outside the attempt's folder, and a hostile
listing fails the run for good (CollectionRefused, a RunError), asked for once, never retried.
One test on the lab's real sshd (h2) checks a symlink and a name with a newline end to end.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from bench.collect import collect_dir
from bench.execute import ExecuteOptions, execute
from bench.manifest import load_manifest
from bench.plan import PlannedRun
from bench.rules import load_rules
from bench.run import Mode, RunKind, RunSpec, Scenario
from bench.store import RunStore
from bench.target import RunTarget, remote_run_dir
from lab.config import HostConfig, Inventory, Limits
from lab.errors import CollectionRefused, RunError, is_link_fault, is_transient
from lab.ssh import SshHost
from tests.support.hostile_ssh import HostileTarget, Script

RUN_DIR = "/srv/subrun/runs/k-a1"
SENTINEL = "hostile-sentinel"  # three levels above an attempt folder's output/


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[paramiko.PKey, Path]:
    """A throwaway host key for the server, and a client key file."""
    client = tmp_path_factory.mktemp("keys") / "client_key"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(client))
    return paramiko.RSAKey.generate(2048), client


@pytest.fixture
def hostile(keys: tuple[paramiko.PKey, Path]) -> Iterator[HostileTarget]:
    server = HostileTarget(Script(), keys[0])
    yield server
    server.close()


def listing(files: list[str], others: list[str] = ()) -> bytes:  # type: ignore[assignment]
    return "".join(f"{n}\0" for n in [*files, "subrun:not-regular", *others]).encode()


def attempt_dir(tmp_path: Path) -> Path:
    """An attempt folder three levels below tmp_path, so `../../../x` from its output/ is
    tmp_path/x: the sentinel a collector that trusts `..` would write."""
    folder = tmp_path / "store" / "attempt"
    folder.mkdir(parents=True)
    return folder


def connect(hostile: HostileTarget, tmp_path: Path, keys: tuple[paramiko.PKey, Path],
            **update: object) -> SshHost:
    return SshHost(hostile.config(tmp_path, keys[1], **update))


HOSTILE_LISTINGS = {
    "dot-dot": (listing(["./user.conf", f"./output/../../../{SENTINEL}"]), "../../../"),
    "absolute": (listing(["./user.conf", f"{Path.cwd()}/{SENTINEL}"]), "outside"),
    "symlink": (listing(["./user.conf"], ["./output/etc"]), "symlink"),
    "unterminated": (b"./user.conf\0subrun:not-regular\0./x", "malformed"),
    "no-marker": (b"./user.conf\0", "malformed"),
    "empty-part": (listing(["./output//x"]), "not plain"),
    "twice": (listing(["./user.conf", "./user.conf"]), "twice"),
    "store-record": (listing(["./run.json"]), "run store"),
    "file-and-folder": (listing(["./a", "./a/b"]), "'a/b'"),
    "huge-count": (listing([f"./output/f{i}" for i in range(50_001)]), "50001 files"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_LISTINGS))
def test_hostile_listing_is_refused(case: str, hostile: HostileTarget, tmp_path: Path,
                                    keys: tuple[paramiko.PKey, Path]) -> None:
    crafted, reason = HOSTILE_LISTINGS[case]
    hostile.script.listing = crafted
    host = connect(hostile, tmp_path, keys)
    with pytest.raises(CollectionRefused) as caught:
        collect_dir(host, RUN_DIR, attempt_dir(tmp_path), Limits())
    assert isinstance(caught.value, RunError) and not is_link_fault(caught.value)
    assert not is_transient(caught.value)
    assert reason in str(caught.value) and RUN_DIR in str(caught.value)
    assert not (tmp_path / SENTINEL).exists()
    assert not (Path.cwd() / SENTINEL).exists()
    assert hostile.script.listings() == 1
    host.close()


def test_names_with_newlines_are_names(hostile: HostileTarget, tmp_path: Path,
                                       keys: tuple[paramiko.PKey, Path]) -> None:
    hostile.script.listing = listing(["./output/two\nlines.txt", "./user.conf"])
    hostile.script.files = {f"{RUN_DIR}/output/two\nlines.txt": b"a\nb\n",
                            f"{RUN_DIR}/user.conf": b"conf\n"}
    folder = attempt_dir(tmp_path)
    collected = collect_dir(connect(hostile, tmp_path, keys), RUN_DIR, folder, Limits())
    assert collected.files == 2 and collected.bytes == 9
    assert (folder / "output" / "two\nlines.txt").read_bytes() == b"a\nb\n"


def test_a_file_listed_regular_but_a_symlink_is_refused(hostile: HostileTarget, tmp_path: Path,
                                                        keys: tuple[paramiko.PKey, Path]) -> None:
    hostile.script.listing = listing(["./output/passwd"])
    hostile.script.symlinks = {f"{RUN_DIR}/output/passwd"}
    folder = attempt_dir(tmp_path)
    with pytest.raises(CollectionRefused, match="not a regular file"):
        collect_dir(connect(hostile, tmp_path, keys), RUN_DIR, folder, Limits())
    assert not (folder / "output" / "passwd").exists()


def test_total_size_is_capped(hostile: HostileTarget, tmp_path: Path,
                              keys: tuple[paramiko.PKey, Path]) -> None:
    hostile.script.listing = listing(["./a", "./b"])
    hostile.script.files = {f"{RUN_DIR}/a": b"x" * 600, f"{RUN_DIR}/b": b"y" * 600}
    limits = Limits(collect_max_bytes="1KiB")
    with pytest.raises(CollectionRefused, match=r"'b'.*more than the 424 allowed"):
        collect_dir(connect(hostile, tmp_path, keys), RUN_DIR, attempt_dir(tmp_path), limits)


def test_a_hostile_run_fails_for_good_and_is_not_retried(hostile: HostileTarget, tmp_path: Path,
                                                         keys: tuple[paramiko.PKey, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole execution on the hostile target: start, end, collect; the run is recorded
    failed with the path in its reason, and execute returns instead of raising a fault a
    flow would retry."""
    attempts = tmp_path / "tmp"
    attempts.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(attempts))  # subrun-collect-*/ lives here
    config = hostile.config(tmp_path, keys[1])
    host = SshHost(config)
    manifest = load_manifest("digits")
    target = RunTarget(host=host, config=config, manifest=manifest, image="/srv/subrun/env",
                       image_id="sha256:hostile")
    spec = RunSpec(host="hostile", benchmark="digits", model="resnet",
                   scenario=Scenario.OFFLINE, kind=RunKind.PERFORMANCE, mode=Mode.SHORT,
                   round="v6.1")
    store = RunStore(tmp_path / "store")
    rid = f"{target.campaign}-{spec.key}-a1"
    hostile.script.listing = listing([f"./output/../../../{SENTINEL}"])
    record = execute(target, PlannedRun(spec, 10.0), store, load_rules("v6.1"),
                     options=ExecuteOptions(min_timeout_s=30))
    assert record.state == "failed" and record.verdict is None
    assert f"'./output/../../../{SENTINEL}'" in record.error
    assert remote_run_dir(target, rid) in record.error
    assert not (attempts / SENTINEL).exists() and not (tmp_path / SENTINEL).exists()
    assert hostile.script.listings() == 1 and len(store.attempts(spec.key)) == 1
    assert any(c.startswith("rm -rf") for c in hostile.script.commands)  # target cleaned
    host.close()


@pytest.mark.lab
def test_real_sshd_symlink_refused_newline_name_collected(lab_inventory: Inventory,
                                                          tmp_path: Path) -> None:
    config: HostConfig = lab_inventory.host("h2").model_copy(
        update={"work_dir": str(tmp_path / "work")})
    host = SshHost(config)
    run_dir = f"{config.work_dir}/runs/r-a1"
    host.run(["sh", "-c", 'mkdir -p "$1/output" && printf "a\\nb\\n" > "$1/output/$2" '
              '&& echo conf > "$1/user.conf"', "sh", run_dir, "two\nlines.txt"])
    folder = attempt_dir(tmp_path)
    collected = collect_dir(host, run_dir, folder, Limits())
    assert collected.files == 2
    assert (folder / "output" / "two\nlines.txt").read_bytes() == b"a\nb\n"
    host.run(["ln", "-s", "/etc", f"{run_dir}/output/etc"])
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(CollectionRefused, match=r"symlink.*'\./output/etc'"):
        collect_dir(host, run_dir, again, Limits())
    assert not (again / "output" / "etc").exists()
    host.close()


def test_limits_are_settings_of_each_host() -> None:
    entry = {"name": "n1", "address": "10.0.0.1",
             "limits": {"collect_max_files": 10, "collect_max_bytes": "2GiB",
                        "output_max_bytes": "4MiB"}}
    limits = HostConfig.model_validate(entry).limits
    assert (limits.collect_max_files, limits.collect_max_bytes) == (10, 2 * 1024**3)
    assert limits.output_max_bytes == 4 * 1024**2
    assert HostConfig.model_validate({**entry, "limits": {}}).limits == Limits()
    with pytest.raises(ValueError, match="output_max_bytes"):
        HostConfig.model_validate({**entry, "limits": {"output_max_bytes": 0}})
