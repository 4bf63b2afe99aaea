"""The cores a run measures (`lab.cores`): core lists, `auto`, hosts.yaml's `cpuset:` and its
errors, the docker and native command lines of a pinned run, and keeping the controller off."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from bench.manifest import load_manifest
from bench.native import NATIVE
from bench.target import RunTarget
from lab import cores
from lab.config import DockerSettings, HostConfig, load_inventory
from lab.docker import TOP_CPU_SHARES, ContainerSpec, Engine, container_args
from lab.errors import ConfigError
from testkit.fake_host import FakeHost, Reply

SPEC = ContainerSpec(image="subrun/digits:abc", argv=("python3", "-m", "x"), run_key="k1",
                     run_dir="/w/runs/k1", run_mount="/subrun/run")


# --- core lists ---------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "expected"), [
    ("1", (1,)), ("1-3", (1, 2, 3)), ("0,2-3", (0, 2, 3)), ("3, 1", (1, 3)),
    ([3, 1, 2], (1, 2, 3)), ([1, 1], (1,)), (2, (2,)), ("0-0", (0,)),
])
def test_core_lists_are_read(given: cores.CpuSetting, expected: tuple[int, ...]) -> None:
    assert cores.cores_of(given) == expected


@pytest.mark.parametrize(("given", "words"), [
    ("", "not a core list"), ("1-", "not a core list"), ("a", "not a core list"),
    ("-1", "not a core list"), ("3-1", "runs backwards; write 1-3"), ([], "empty core list"),
    ([1, "2"], "list of core numbers"), (True, "not a core list"), ([-1], "not a core number"),
    ("0-99999", "beyond any machine"),
])
def test_bad_core_lists_say_what_is_wrong(given: cores.CpuSetting, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        cores.cores_of(given)


@pytest.mark.parametrize(("given", "written"), [
    ((1,), "1"), ((1, 2, 3), "1-3"), ((0, 2, 3), "0,2-3"), ((5, 0, 1, 7, 6), "0-1,5-7"),
    ((), ""),
])
def test_core_lists_are_written_as_the_kernel_writes_them(given: tuple[int, ...],
                                                          written: str) -> None:
    assert cores.core_list(given) == written
    if given:
        assert cores.cores_of(written) == tuple(sorted(given))


def test_auto_is_every_core_but_core_0_and_nothing_on_one_core() -> None:
    assert cores.auto_cores(4) == (1, 2, 3)
    assert cores.auto_cores(2) == (1,)
    assert cores.auto_cores(1) == ()
    assert cores.resolve("auto", 8) == tuple(range(1, 8))
    assert cores.resolve(None, 8) == ()


def test_a_core_the_host_lacks_names_file_host_field_and_fix() -> None:
    assert cores.resolve("1-3", 4) == (1, 2, 3)
    with pytest.raises(ConfigError) as caught:
        cores.resolve("2-5", 4, host="h2", field="docker.cpuset", source="/lab/hosts.yaml")
    text = str(caught.value)
    assert text.startswith("/lab/hosts.yaml: host 'h2' pins its runs to cores 2-5")
    assert "`docker.cpuset`" in text and "4 core(s), numbered 0-3" in text
    assert "set `docker.cpuset` to cores among 0-3, or to `auto`" in text


# --- hosts.yaml -------------------------------------------------------------------------------

def inventory_with(tmp_path: Path, host: str) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts:\n  - {{name: a, transport: local, {host}}}\n")
    return path


@pytest.mark.parametrize(("written", "stored"), [
    ('docker: {cpuset: "1-3"}', "1-3"), ("docker: {cpuset: [3, 1, 2]}", "1-3"),
    ("docker: {cpuset: auto}", "auto"), ("docker: {cpuset: 2}", "2"),
    ('docker: {cpuset: "0, 2-3"}', "0,2-3"),
])
def test_hosts_yaml_takes_a_core_list_or_auto(tmp_path: Path, written: str, stored: str) -> None:
    config = load_inventory(inventory_with(tmp_path, written)).host("a")
    assert config.docker.cpuset == stored
    assert cores.setting_of(config) == (stored, "docker.cpuset")


def test_a_native_host_is_pinned_by_its_native_section(tmp_path: Path) -> None:
    config = load_inventory(inventory_with(
        tmp_path, 'docker: {engine: false}, native: {cpuset: "1"}')).host("a")
    assert cores.setting_of(config) == ("1", "native.cpuset")
    unpinned = load_inventory(inventory_with(tmp_path, "labels: []")).host("a")
    assert cores.setting_of(unpinned) == (None, "docker.cpuset")


@pytest.mark.parametrize(("written", "words"), [
    ('docker: {cpuset: "3-1"}', r"hosts\.yaml.*docker\.cpuset.*runs backwards"),
    ("docker: {cpuset: []}", r"docker\.cpuset.*empty core list"),
    ("docker: {cpuset: {a: 1}}", r"docker\.cpuset.*not a core list"),
    ("docker: {cpuset: autoo}", r"docker\.cpuset.*not a core list.*or auto"),
    ('native: {cpuset: "1"}', r"runs benchmarks in containers.*move it to `docker: "
                              r"\{cpuset: \.\.\.\}`"),
    ('docker: {engine: false, cpuset: "1"}', r"natively.*move it to `native: \{cpuset"),
])
def test_bad_cpuset_is_a_clear_config_error(tmp_path: Path, written: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_inventory(inventory_with(tmp_path, written))
    assert caught.match(f"(?s){words}")


def test_the_embedded_default_pins_its_runs_off_core_0() -> None:
    local = load_inventory().host("local")
    assert local.docker.cpuset == "auto"


# --- command lines ----------------------------------------------------------------------------

def test_a_pinned_container_has_its_cores_and_the_top_cpu_weight() -> None:
    args = container_args(SPEC, DockerSettings(), "1000:1000", (1, 2, 3))
    at = args.index("--cpuset-cpus")
    assert args[at:at + 4] == ["--cpuset-cpus", "1-3", "--cpu-shares", str(TOP_CPU_SHARES)]
    assert TOP_CPU_SHARES == 262144
    assert args.index("--cpuset-cpus") < args.index(SPEC.image)  # an option, not the command's


def test_an_unpinned_container_is_started_as_before() -> None:
    args = container_args(SPEC, DockerSettings(), "1000:1000")
    assert "--cpuset-cpus" not in args and "--cpu-shares" not in args


def engine_host(name: str, nproc: str | None = None) -> FakeHost:
    """A fake host whose engine starts containers, with nproc cores when given."""
    host = FakeHost(name)
    if nproc is not None:
        host.on(["nproc", "--all"], Reply(stdout=f"{nproc}\n"))
    host.on(["sh", "-c", "echo $(id -u):$(id -g)"], Reply(stdout="1000:1000\n"))
    host.on(["docker", "ps"], Reply())
    host.on(["docker", "run"], Reply(stdout="c" * 64 + "\n"))
    return host


def started_docker_run(host: FakeHost) -> tuple[str, ...]:
    return next(c for c in host.commands() if c[:2] == ("docker", "run"))


def test_engine_resolves_auto_from_the_hosts_core_count() -> None:
    host = engine_host("h2", "4")
    engine = Engine(host, DockerSettings(cpuset="auto"))
    engine.start(SPEC)
    engine.start(ContainerSpec(**{**SPEC.__dict__, "run_key": "k2"}))
    run = started_docker_run(host)
    assert run[run.index("--cpuset-cpus") + 1] == "1-3"
    assert host.commands().count(("nproc", "--all")) == 1  # asked once per connection


def test_an_unpinned_engine_asks_nothing_about_cores() -> None:
    host = engine_host("h3")
    Engine(host, DockerSettings()).start(SPEC)
    assert ("nproc", "--all") not in host.commands()
    assert "--cpuset-cpus" not in started_docker_run(host)


def test_a_core_beyond_the_host_refuses_the_start() -> None:
    host = engine_host("h2", "2")
    with pytest.raises(ConfigError, match=r"host 'h2' pins its runs to cores 1-3"):
        Engine(host, DockerSettings(cpuset="1-3")).start(SPEC)
    assert not any(c[:2] == ("docker", "run") for c in host.commands())


def native_target(host: FakeHost, cpuset: str | None) -> RunTarget:
    config = HostConfig.model_validate({"name": host.name, "address": "127.0.0.9",
                                        "docker": {"engine": False},
                                        "native": {"cpuset": cpuset} if cpuset else {}})
    return RunTarget(host, config, load_manifest("digits"), "/srv/subrun/native/env", "")


def test_a_pinned_native_run_starts_under_taskset() -> None:
    host = FakeHost("edge")
    host.on(["nproc", "--all"], Reply(stdout="4\n"))
    NATIVE.start(native_target(host, "2-3"), "rid", "/srv/subrun/runs/rid", ["python3", "x"], {})
    argv = host.calls[-1].argv
    assert argv[:3] == ("taskset", "-c", "2-3") and argv[-2:] == ("python3", "x")


def test_an_unpinned_native_run_starts_as_before() -> None:
    host = FakeHost("edge")
    NATIVE.start(native_target(host, None), "rid", "/srv/subrun/runs/rid", ["python3", "x"], {})
    assert host.calls[-1].argv[0] == "sh" and ("nproc", "--all") not in host.commands()


# --- the controller ---------------------------------------------------------------------------

def test_local_run_cores_are_those_of_local_hosts_only(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: a, transport: local, docker: {cpuset: auto}}\n"
                    "  - {name: b, address: x, docker: {cpuset: '0'}}\n")
    count = os.cpu_count() or 1
    assert cores.local_run_cores(load_inventory(path), path) == cores.auto_cores(count)
    path.write_text(f"hosts:\n  - {{name: a, transport: local, docker: {{cpuset: '{count}'}}}}\n")
    with pytest.raises(ConfigError, match=rf"{path}: host 'a' pins its runs to cores {count}"):
        cores.local_run_cores(load_inventory(path), path)


@pytest.fixture
def every_core() -> Iterator[None]:
    """The test's process may run on every core of the machine, whatever it was started on
    (`scripts/suite.py` runs the host-free tests pinned to a part of them)."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity here")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_keep_off_moves_every_thread_off_the_cores(every_core: None) -> None:
    before = os.sched_getaffinity(0)
    avoid = max(before)
    ready, leave = threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def waiting() -> None:
        ready.set()
        leave.wait(10)
        seen.append(os.sched_getaffinity(0))

    thread = threading.Thread(target=waiting)
    thread.start()
    ready.wait(10)
    try:
        kept = cores.keep_off([avoid])
        assert kept == tuple(sorted(before - {avoid}))
        assert avoid not in os.sched_getaffinity(0)
        assert cores.keep_off([avoid]) == ()  # already off them
    finally:
        leave.set()
        thread.join()
        os.sched_setaffinity(0, before)
        for tid in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(tid), before)
    assert seen and avoid not in seen[0]  # a thread started before was moved too


def test_keep_off_leaves_the_process_where_nothing_else_is_left(every_core: None) -> None:
    before = os.sched_getaffinity(0)
    assert cores.keep_off(before) == ()
    assert cores.keep_off([]) == ()
    assert os.sched_getaffinity(0) == before


def test_subrun_run_keeps_off_the_cores_of_local_runs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli_common import keep_off_local_runs

    asked: list[tuple[int, ...]] = []
    monkeypatch.setattr(cores, "keep_off", lambda avoid: asked.append(tuple(avoid)) or ())
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: a, transport: local, docker: {cpuset: auto}}\n"
                    "  - {name: b, transport: local, docker: {engine: false},"
                    " native: {cpuset: '0'}}\n  - {name: c, address: x, docker: {cpuset: '2'}}\n")
    keep_off_local_runs(load_inventory(path), path)
    assert asked == [(0, 1, 2, 3)]
    path.write_text("hosts:\n  - {name: a, transport: local, docker: {cpuset: '4-5'}}\n")
    with pytest.raises(typer.Exit) as stopped:  # a core this machine lacks: exit 2, no traceback
        keep_off_local_runs(load_inventory(path), path)
    assert stopped.value.exit_code == 2


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_a_timing_test_keeps_the_controller_off_a_pinned_hosts_cores(
        every_core: None, tmp_path: Path) -> None:
    from tests.support.controller_cores import controller_off

    before = os.sched_getaffinity(0)
    pinned = max(before)
    path = tmp_path / "hosts.yaml"
    path.write_text(f"hosts:\n  - {{name: a, transport: local, docker: {{cpuset: '{pinned}'}}}}\n")
    with controller_off(load_inventory(path), "a") as avoided:
        assert avoided == (pinned,)
        assert pinned not in os.sched_getaffinity(0)
        seen: list[set[int]] = []
        thread = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        thread.start()
        thread.join()
        assert pinned not in seen[0]  # what the controller starts inside stays off them too
    assert os.sched_getaffinity(0) == before
