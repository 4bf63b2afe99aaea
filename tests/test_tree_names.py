"""Names that become folders or reach ~/.ssh/config are checked where they enter, and the
submission tree is swapped in one step."""

from __future__ import annotations

import multiprocessing
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.campaign import load_campaign
from lab.config import load_inventory
from lab.errors import ConfigError
from submission import swap
from submission.assemble import TreeRequest, assemble
from submission.layout import Layout, ResultKey

ESCAPES = ["../escape", "/abs", "a/b", "..", ".hidden", "-rf", "x y"]


@pytest.mark.parametrize("submitter", ESCAPES)
def test_campaign_submitter_must_be_a_folder_name(tmp_path: Path, submitter: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"submitter: '{submitter}'\nhosts: [{{host: local, benchmarks: "
                    "[{benchmark: digits}]}]\n")
    with pytest.raises(ConfigError) as caught:
        load_campaign(path)
    assert caught.value.exit_code == 2
    assert "submitter" in str(caught.value) and "cannot be a folder name" in str(caught.value)


def test_inventory_default_submitter_must_be_a_folder_name(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("system_defaults: {submitter: ../../etc}\n"
                    "hosts: [{name: here, transport: local}]\n")
    with pytest.raises(ConfigError, match="cannot be a folder name"):
        load_inventory(path)


def test_assembly_refuses_a_submitter_that_leaves_the_tree(tmp_path: Path) -> None:
    request = TreeRequest(root=tmp_path / "out" / "tree", division="open",
                          submitter="../../escaped", round="v6.1")
    with pytest.raises(ConfigError, match="not a single folder name"):
        assemble(request, [], {}, {})
    assert sorted(p.name for p in tmp_path.rglob("*")) in ([], ["out"])


@pytest.mark.parametrize("part", ["..", "a/b", "", "."])
def test_layout_joins_only_single_folder_names(tmp_path: Path, part: str) -> None:
    with pytest.raises(ConfigError):
        Layout(tmp_path, "open", part)
    with pytest.raises(ConfigError):
        ResultKey(part, "resnet", "Offline")
    with pytest.raises(ConfigError):
        Layout(tmp_path, "open", "ACME").system_json(part)


def test_ssh_alias_with_shell_characters_is_refused_at_load(tmp_path: Path) -> None:
    from flows.cli import app

    marker = tmp_path / "ran"
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts: [{{name: n1, ssh_alias: 'n1;touch {marker}'}}]\n")
    result = CliRunner().invoke(app, ["hosts", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert "is not a host name" in " ".join(result.output.split())
    assert not marker.exists()
    path.write_text("hosts: [{name: n1, ssh_alias: build-01.lab_a}]\n")
    assert load_inventory(path).hosts[0].ssh_alias == "build-01.lab_a"


def _tree(path: Path, label: str) -> Path:
    (path / "open" / "ACME").mkdir(parents=True)
    (path / "open" / "ACME" / "label").write_text(label)
    return path


def _watch(label: Path, ready: EventType, done: EventType, checks: Synchronized[int],
           missing: Synchronized[int]) -> None:
    """In a process of its own (a thread would take the GIL from the swaps it watches): look
    for the tree's file as fast as it can until told to stop, counting the looks that miss
    (counted here, handed over once at the end, so no lock slows the looking)."""
    looks, misses = 0, 0
    ready.set()
    while not done.is_set():
        misses += not label.exists()
        looks += 1
    checks.value, missing.value = looks, misses


def test_swap_exchanges_trees_and_never_leaves_the_root_missing(tmp_path: Path) -> None:
    root = _tree(tmp_path / "tree", "old")
    fork = multiprocessing.get_context("fork")
    ready, done = fork.Event(), fork.Event()
    checks, missing = fork.Value("q", 0), fork.Value("q", 0)
    watcher = fork.Process(target=_watch, args=(root / "open" / "ACME" / "label", ready, done,
                                                checks, missing))
    watcher.start()
    try:
        assert ready.wait(30), "the watcher never looked"
        for i in range(200):
            swap.swap_in(_tree(tmp_path / "new", str(i)), root)
            assert (tmp_path / "new" / "open" / "ACME" / "label").exists()  # the old tree
            swap.shutil.rmtree(tmp_path / "new")
    finally:
        done.set()
        watcher.join(30)
    assert (root / "open" / "ACME" / "label").read_text() == "199"
    assert checks.value > 200, checks.value  # it looked throughout, not once
    assert not missing.value, f"the tree was missing {missing.value} times during swaps"


def test_fallback_swap_and_recovery_after_a_crash(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(swap, "_exchange", lambda a, b: False)
    root = _tree(tmp_path / "tree", "old")
    swap.swap_in(_tree(tmp_path / "new", "new"), root)
    assert (root / "open" / "ACME" / "label").read_text() == "new"
    assert (tmp_path / "new" / "open" / "ACME" / "label").read_text() == "old"
    assert not swap.previous(root).exists()
    root.rename(swap.previous(root))  # killed after setting the old tree aside
    swap.recover(root)
    assert (root / "open" / "ACME" / "label").read_text() == "new"
    _tree(swap.previous(root), "stale")  # killed after the new tree made it in
    swap.recover(root)
    assert not swap.previous(root).exists() and root.exists()


def test_an_unchecked_ssh_alias_never_reaches_the_ssh_config_lookup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab import ssh
    from lab.config import HostConfig

    config_file = tmp_path / "ssh_config"
    config_file.write_text("Match exec \"test %h = n1\"\n  User nobody\n")
    monkeypatch.setattr(ssh, "USER_SSH_CONFIG", config_file)
    good = HostConfig(name="n1", ssh_alias="n1")
    bad = good.model_copy(update={"ssh_alias": f"n1;touch {tmp_path / 'pwned'}"})
    with pytest.raises(ConfigError, match="is not a host name"):
        ssh.resolve_target(bad)
    assert not (tmp_path / "pwned").exists()
