"""The Docker seam against the lab's real engines: one-shot commands, run containers, errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.config import DockerSettings, HostConfig, Inventory, Mount
from lab.docker import (
    ContainerSpec,
    Engine,
    container_args,
    engine_error,
    gpu_args,
)
from lab.errors import CommandFailed, CommandTimedOut, ImageError
from lab.host import CommandResult, Host
from lab.transport import open_host

BASE = "subrun/debian:bookworm"


@pytest.fixture(params=["local", "h2"])
def target(request: pytest.FixtureRequest, lab_inventory: Inventory,
           tmp_path: Path) -> Iterator[tuple[Host, HostConfig]]:
    config = lab_inventory.host(request.param)
    config = config.model_copy(update={"work_dir": str(tmp_path / "work")})
    host = open_host(config)
    yield host, config
    host.close()


# --- pure: argument building and error translation ---------------------------------------

def test_gpu_arguments() -> None:
    assert gpu_args(None) == []
    assert gpu_args("all") == ["--gpus", "all"]
    assert gpu_args(["0", "2"]) == ["--gpus", '"device=0,2"']


def test_container_arguments_carry_settings_and_identity() -> None:
    settings = DockerSettings(gpus="all", shm_size="2g", ulimits={"memlock": -1, "stack": 67108864},
                              mounts=[Mount(source="/data/imagenet", target="/subrun/data")])
    spec = ContainerSpec(image="subrun/digits:abc", argv=("python3", "-m", "x"), run_key="k1",
                         run_dir="/w/runs/k1", run_mount="/subrun/run", env={"A": "1"},
                         labels={"org.subrun.label": "h2/digits/Offline/performance"})
    args = container_args(spec, settings, "1000:1000")
    joined = " ".join(args)
    assert args[:2] == ["run", "--detach"]
    assert "--label org.subrun.run=k1" in joined
    assert "--gpus all" in joined and "--shm-size 2g" in joined
    assert "--ulimit memlock=-1" in joined and "--ulimit stack=67108864" in joined
    assert "type=bind,source=/data/imagenet,target=/subrun/data,readonly" in joined
    assert "type=bind,source=/w/runs/k1,target=/subrun/run --" not in joined
    assert args[args.index("type=bind,source=/w/runs/k1,target=/subrun/run") - 1] == "--mount"
    assert "--workdir /subrun/run" in joined and "--user 1000:1000" in joined
    assert "--network none" in joined and "--pull never" in joined
    assert args[-4:] == ["subrun/digits:abc", "python3", "-m", "x"]


@pytest.mark.parametrize(("stderr", "status", "words"), [
    ("sh: 1: docker: not found", 127, "no docker command"),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
     "running?", 1, "no Docker engine answers"),
    ("write /var/lib/docker/tmp/x: no space left on device", 1, "ran out of disk space"),
    ("Error: No such image: subrun/x:1", 1, "does not have that image"),
    ("something else entirely", 2, "exited with status 2"),
])
def test_engine_errors_name_host_and_cause(stderr: str, status: int, words: str) -> None:
    result = CommandResult("h9", ("docker", "build", "-"), status, "", stderr, 0.1)
    message = str(engine_error(result, "building image 'subrun/x:1'"))
    assert "h9" in message and words in message
    assert stderr.splitlines()[-1] in message


# --- real engines -------------------------------------------------------------------------

@pytest.mark.lab
def test_oneshot_returns_output(target: tuple[Host, HostConfig]) -> None:
    host, config = target
    result = Engine(host, config.docker).oneshot(BASE, ["python3", "-c", "print(6 * 7)"], 60)
    assert result.ok and result.stdout.strip() == "42"
    failed = Engine(host, config.docker).oneshot(BASE, ["sh", "-c", "echo why; exit 3"], 60,
                         check=False)
    assert failed.exit_status == 3 and failed.stdout.strip() == "why"
    with pytest.raises(CommandFailed) as caught:
        Engine(host, config.docker).oneshot(BASE, ["sh", "-c", "echo why; exit 3"], 60)
    assert host.name in str(caught.value) and BASE in str(caught.value)


@pytest.mark.lab
def test_oneshot_unknown_image_is_an_image_error(target: tuple[Host, HostConfig]) -> None:
    host, config = target
    with pytest.raises(ImageError) as caught:
        Engine(host, config.docker).oneshot("subrun/no-such-image:0", ["true"], 60)
    assert host.name in str(caught.value) and "no-such-image" in str(caught.value)


@pytest.mark.lab
def test_oneshot_timeout_removes_the_container(target: tuple[Host, HostConfig]) -> None:
    host, config = target
    marker = f"{60 + uuid.uuid4().int % 1000 / 1000:.3f}"  # a sleep no one else runs
    with pytest.raises(CommandTimedOut):
        Engine(host, config.docker).oneshot(BASE, ["sleep", marker], 3)
    listed = Engine(host, config.docker).docker(
        ["ps", "--all", "--no-trunc", "--filter", "label=org.subrun.oneshot=1",
         "--format", "{{.Command}}"], what="listing containers")
    assert marker not in listed.stdout


@pytest.mark.lab
def test_no_engine_is_a_clear_error(target: tuple[Host, HostConfig]) -> None:
    host, config = target
    broken = config.docker.model_copy(update={"docker_host": "unix:///nonexistent/docker.sock"})
    with pytest.raises(ImageError) as caught:
        Engine(host, broken).oneshot(BASE, ["true"], 30)
    assert f"On host '{host.name}', no Docker engine answers" in str(caught.value)
    disabled = config.docker.model_copy(update={"engine": False})
    with pytest.raises(ImageError, match="engine: false"):
        Engine(host, disabled).oneshot(BASE, ["true"], 30)


@pytest.mark.lab
def test_run_container_lifecycle(target: tuple[Host, HostConfig], tmp_path: Path) -> None:
    host, config = target
    key = "t" + uuid.uuid4().hex[:15]
    run_dir = f"{host.work_dir}/runs/{key}"
    script = "echo started; pwd; sleep 2; echo result > output.txt; echo done >&2; exit 4"
    spec = ContainerSpec(image=BASE, argv=("sh", "-c", script), run_key=key, run_dir=run_dir,
                         run_mount="/subrun/run", labels={"org.subrun.label": "test"})
    container = Engine(host, config.docker).start(spec)
    try:
        assert Engine(host, config.docker).status(container).running
        with pytest.raises(ImageError, match="already exists"):
            Engine(host, config.docker).start(spec)
        host.close()  # a controller restart: a fresh connection finds it by its key alone
        again = open_host(config)
        found = Engine(again, config.docker).find(key)
        assert found is not None and found.id == container.id
        status = Engine(again, config.docker).wait(found, timeout_s=60)
        assert not status.running and status.exit_status == 4
        assert status.image_id == Engine(again, config.docker).image_id(BASE)
        logs = Engine(again, config.docker).logs(found)
        assert "started" in logs and "/subrun/run" in logs and "done" in logs
        assert again.read_text(f"{run_dir}/output.txt") == "result\n"
        Engine(again, config.docker).remove(found)
        assert Engine(again, config.docker).find(key) is None
        Engine(again, config.docker).remove(found)  # removing twice is fine
    finally:
        Engine(host, config.docker).remove(container)
    assert Engine(host, config.docker).find("no-such-run-key") is None


@pytest.mark.lab
def test_wait_returns_running_at_deadline(target: tuple[Host, HostConfig]) -> None:
    host, config = target
    key = "t" + uuid.uuid4().hex[:15]
    spec = ContainerSpec(image=BASE, argv=("sleep", "60"), run_key=key,
                         run_dir=f"{host.work_dir}/runs/{key}", run_mount="/subrun/run")
    container = Engine(host, config.docker).start(spec)
    try:
        assert Engine(host, config.docker).wait(container, timeout_s=1).running
    finally:
        Engine(host, config.docker).remove(container)
    assert Engine(host, config.docker).find(key) is None
