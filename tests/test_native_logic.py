"""The pure parts of native runs: the interpreter probe's parser and checks, wheel tags, path
mapping, the manifest's `native:` section and the command a native run starts."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.manifest import Manifest, load_manifest
from bench.native import NATIVE, provision
from bench.run import RUN_MOUNT, Mode, RunKind, RunSpec, Scenario
from bench.target import RunTarget, container_argv
from lab.config import HostConfig
from lab.errors import ConfigError, ImageError
from lab.interpreter import Interpreter, check_interpreter, parse_probe, wheel_fits
from lab.native import NativeSpec, in_env, map_paths, native_tag
from lab.yamlfile import load_model
from testkit.fake_host import FakeHost, Reply

# Printed by the probe with Debian 12's /usr/bin/python3 on the lab host.
DEBIAN_12 = ('{"executable": "/usr/bin/python3", "version": "3.11.2", "machine": "x86_64", '
             '"bits": 64, "libc": "glibc", "libc_version": "2.36", "venv": true}\n')
LOADGEN = "mlcommons_loadgen-6.0.17-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"


def interpreter(**changes: Any) -> Interpreter:
    return replace(parse_probe(DEBIAN_12, "python3"), **changes)


def test_probe_output_parses() -> None:
    found = parse_probe("some banner\n" + DEBIAN_12, "python3")
    assert (found.version, found.minor, found.machine, found.glibc, found.venv) == (
        "3.11.2", "3.11", "x86_64", (2, 36), True)


def test_a_32_bit_userland_on_a_64_bit_kernel_is_named_by_its_userland() -> None:
    pi = DEBIAN_12.replace('"x86_64"', '"aarch64"').replace('"bits": 64', '"bits": 32')
    assert parse_probe(pi, "python3").machine == "armv7l"


@pytest.mark.parametrize(("changes", "expected"), [
    ({"version": "3.9.2"}, "built for Python 3.11"),
    ({"venv": False}, "python3-venv"),
    ({"glibc": None}, "need glibc"),
])
def test_unusable_interpreters_are_refused_naming_host_and_benchmark(
        changes: dict[str, object], expected: str) -> None:
    with pytest.raises(ImageError) as caught:
        check_interpreter(interpreter(**changes), "3.11", "pi4", "digits")
    assert "Host 'pi4'" in str(caught.value) and "'digits'" in str(caught.value)
    assert expected in str(caught.value)


def test_debian_12_python_is_accepted() -> None:
    check_interpreter(interpreter(), "3.11", "h2", "digits")


@pytest.mark.parametrize(("wheel", "fits"), [
    (LOADGEN, True),
    ("joblib-1.6.0-py3-none-any.whl", True),
    (LOADGEN.replace("x86_64", "aarch64"), False),
    (LOADGEN.replace("cp311", "cp310"), False),
    ("numpy-2.4.6-cp311-cp311-manylinux_2_39_x86_64.whl", False),  # needs a newer glibc
    ("numpy-2.4.6-cp311-cp311-manylinux2014_x86_64.whl", True),
    ("numpy-2.4.6-cp311-cp311-musllinux_1_2_x86_64.whl", False),
    ("cryptography-44.0.0-cp37-abi3-manylinux_2_28_x86_64.whl", True),
    ("broken.whl", False),
])
def test_wheel_tags_are_matched_to_the_interpreter(wheel: str, fits: bool) -> None:
    assert wheel_fits(wheel, interpreter()) is fits


def test_paths_map_whole_components_longest_first() -> None:
    mapping = {"/opt/model": "/env/model", "/opt/model/big": "/data/big", RUN_MOUNT: "/w/r1"}
    argv = ["/opt/model/x.pkl", "--out=/subrun/run/output", "/opt/modelx", "/x/opt/model",
            "/opt/model/big/y", "/opt/model"]
    assert map_paths(argv, mapping) == ["/env/model/x.pkl", "--out=/w/r1/output",
                                        "/opt/modelx", "/x/opt/model", "/data/big/y",
                                        "/env/model"]


def test_native_accuracy_run_maps_both_commands_and_runs_in_the_venv() -> None:
    manifest = load_manifest("digits")
    spec = RunSpec(host="edge", benchmark="digits", model="resnet", scenario=Scenario.OFFLINE,
                   kind=RunKind.ACCURACY, mode=Mode.SHORT, round="v6.1")
    paths = {RUN_MOUNT: "/w/runs/k-a1", "/opt/model": "/w/native/digits-t/model"}
    argv = container_argv(manifest, spec, paths)
    assert argv[:2] == ["sh", "-c"]
    assert "--model-dir /w/native/digits-t/model" in argv[2]
    assert "--log /w/runs/k-a1/output/mlperf_log_accuracy.json" in argv[2]
    assert "/subrun" not in argv[2] and "/opt/model" not in argv[2]
    assert container_argv(manifest, spec)[2].count(RUN_MOUNT) == 3  # containers: as they were
    entered = in_env("/w/native/digits-t", argv)
    assert entered[3] == "/w/native/digits-t" and entered[4:] == argv


def test_environment_tag_follows_its_inputs() -> None:
    image = load_manifest("digits").image_spec()
    spec = NativeSpec(image, setup=(("python", "-m", "train"),), paths=(("/opt/model", "m"),))
    tag = native_tag(spec, interpreter(), [None, None])
    assert tag == native_tag(spec, interpreter(), [None, None])
    assert tag != native_tag(NativeSpec(image, paths=spec.paths), interpreter(), [None, None])
    assert tag != native_tag(spec, interpreter(version="3.11.9"), [None, None])


def manifest_with(tmp_path: Path, native: str) -> Path:
    text = (Path(__file__).resolve().parent.parent / "images/digits/benchmark.yaml").read_text()
    start = text.index("native:")
    end = text.index("build:")
    path = tmp_path / "benchmark.yaml"
    path.write_text(text[:start] + native + text[end:])
    return path


@pytest.mark.parametrize(("native", "expected"), [
    ("native:\n  setup: [[python, train.py, '{output_dir}']]\n", "only a run has"),
    ("native:\n  setup: [[python, '{weights}']]\n", "not a placeholder"),
    ("native:\n  paths: {/opt/model: venv}\n", "environment's own"),
    ("native:\n  paths: {/subrun: data}\n", "overlaps /subrun/run"),
    ("native:\n  paths: {/opt/model: ../up}\n", "native.paths"),
    ("native:\n  setpu: []\n", "setpu"),
])
def test_bad_native_sections_name_the_field(tmp_path: Path, native: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_model(manifest_with(tmp_path, native), Manifest)
    assert expected in str(caught.value)


def test_native_section_is_optional(tmp_path: Path) -> None:
    manifest = load_model(manifest_with(tmp_path, ""), Manifest)
    assert manifest.native is None and manifest.native_setup_argvs() == []


# --- decisions over a FakeHost: no lab, no processes -----------------------------------------

def edge_target(host: FakeHost, python: str = "/usr/bin/python3") -> RunTarget:
    config = HostConfig.model_validate({"name": host.name, "address": "127.0.0.9",
                                        "docker": {"engine": False},
                                        "native": {"python": python}})
    return RunTarget(host, config, load_manifest("digits"), "/srv/subrun/native/env", "")


def test_missing_interpreter_is_refused_before_anything_is_sent() -> None:
    host = FakeHost("h2-native")
    target = edge_target(host, python="python3.99")
    with pytest.raises(ImageError) as caught:
        provision(host, target.config, target.manifest)
    assert "Host 'h2-native' has no `python3.99`" in str(caught.value)
    assert "apt-get install python3 python3-venv" in str(caught.value)
    assert [argv[0] for argv in host.commands()] == ["python3.99"]  # the probe, nothing sent


def test_a_native_run_past_its_limit_is_stopped_with_term_and_removed() -> None:
    host = FakeHost("edge")
    target = edge_target(host)
    entered = in_env(target.image, ["python3", "-m", "digits_bench"])  # in its venv
    host.on(entered, Reply("working\n", duration_s=3600))
    handle = NATIVE.start(target, "r1", "/srv/subrun/runs/r1", ["python3", "-m", "digits_bench"],
                          {})
    assert NATIVE.find(target, "r1") == handle
    assert NATIVE.wait(target, handle, timeout_s=60).running  # at its limit: a timeout ...
    stopped = host.poll_detached(handle)  # ... and stopped with TERM, passed on by the wrapper
    assert not stopped.running and stopped.exit_status == 143
    assert host.clock_s == 60  # the limit, in simulated time: the test took none
    NATIVE.remove(target, handle)
    assert not host.exists(handle.state_dir)


def test_a_vanished_native_process_is_reported_with_a_reason() -> None:
    host = FakeHost("edge")
    target = edge_target(host)
    host.on(in_env(target.image, ["sleep"]), Reply(duration_s=600))
    handle = NATIVE.start(target, "r2", "/srv/subrun/runs/r2", ["sleep", "600"], {})
    host.lose(handle.name)
    status = NATIVE.wait(target, handle, timeout_s=60)
    assert not status.running and status.exit_status == -1 and "vanished" in status.error
