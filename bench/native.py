"""Native runs, for hosts without Docker: the benchmark's environment, and its harness as a
detached process in it.

`provision` makes the benchmark's native environment on the host (`lab.native`): what its image
chain holds, in a venv. `NATIVE` is the runner `bench.target` uses for hosts with
`docker: {engine: false}`: each attempt's harness starts with `Host.start_detached` under the
name `subrun-<run id>`, so it survives a dropped SSH link and is found again by name after a
controller crash, with its run directory as working directory, exactly as a container would
have it mounted, and under `taskset -c` on the host's `native: {cpuset: ...}` cores when it
has them. Image paths in the run's command map to the environment's folders
(`native.paths` in benchmark.yaml), the run directory and the host's mounts to host directories.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bench.assets import host_path
from bench.manifest import Manifest
from bench.run import RUN_MOUNT
from lab.config import HostConfig
from lab.cores import pinned_cores, taskset_argv
from lab.docker import Container, ContainerStatus
from lab.errors import ImageError, RunError
from lab.host import Detached, DetachedStatus, Host
from lab.native import NativeSpec, in_env, path_map, provision_native
from lab.provision import ProvisionOptions, ProvisionResult

if TYPE_CHECKING:
    from bench.target import RunTarget

STOP_GRACE_S = 10.0


def native_spec(manifest: Manifest, config: HostConfig, images_dir: Path | None = None
                ) -> NativeSpec:
    """What the benchmark's native environment on this host is made from."""
    if manifest.native is None:
        raise ImageError(
            f"Host '{config.name}' has no Docker engine (`docker: {{engine: false}}` in "
            f"hosts.yaml), but benchmark '{manifest.name}' has no `native:` section in its "
            "benchmark.yaml, so it runs only in its image. Add one (its Dockerfile's build "
            "steps under `setup`, the image paths they use under `paths`; see "
            "images/digits/benchmark.yaml), or run it on a host with Docker.")
    host_paths = tuple(
        (str(getattr(manifest.mounts, location)),
         host_path(config.name, config.docker, manifest, location))
        for location in ("dataset_dir", "model_dir") if getattr(manifest.mounts, location))
    return NativeSpec(image=manifest.image_spec(images_dir),
                      setup=tuple(tuple(argv) for argv in manifest.native_setup_argvs()),
                      paths=tuple(sorted(manifest.native.paths.items())),
                      host_paths=host_paths)


def provision(host: Host, config: HostConfig, manifest: Manifest,
              options: ProvisionOptions | None = None) -> ProvisionResult:
    """Make the benchmark's native environment present on the host (unchanged: nothing sent)."""
    return provision_native(host, native_spec(manifest, config), python=config.native.python,
                            options=options)


def process_name(rid: str) -> str:
    """The detached process name of an attempt."""
    return f"subrun-{rid}"


class NativeRunner:
    """Attempts as detached processes in the native environment, found again by name."""

    what = "native process"

    def paths(self, target: RunTarget, run_dir: str) -> Mapping[str, str]:
        manifest = target.manifest
        if not isinstance(manifest, Manifest):  # refused when a training campaign is planned
            raise RunError(f"{manifest.name} is a training benchmark: it runs in containers only")
        spec = native_spec(manifest, target.config)
        return {RUN_MOUNT: run_dir, **path_map(target.image, spec)}

    def start(self, target: RunTarget, rid: str, run_dir: str, argv: list[str],
              labels: Mapping[str, str]) -> Detached:
        # labels name a container for people; a process is named by its run id alone
        cores = pinned_cores(target.host, target.config.native.cpuset, field="native.cpuset")
        return target.host.start_detached(taskset_argv(cores, in_env(target.image, argv)),
                                          name=process_name(rid), cwd=run_dir)

    def find(self, target: RunTarget, rid: str) -> Detached | None:
        return target.host.find_detached(process_name(rid))

    def wait(self, target: RunTarget, process: Container | Detached,
             timeout_s: float) -> ContainerStatus:
        assert isinstance(process, Detached)
        status = target.host.wait_detached(process, timeout_s=timeout_s, poll_s=1.0)
        if status.running:
            _stop(target.host, process)
        return _status(status)

    def stop(self, target: RunTarget, process: Container | Detached, grace_s: float) -> None:
        assert isinstance(process, Detached)
        if target.host.poll_detached(process).running:
            _stop(target.host, process, grace_s)

    def output_tail(self, target: RunTarget, process: Container | Detached, lines: int) -> str:
        assert isinstance(process, Detached)
        result = target.host.run(["tail", "-n", str(lines), process.log_path], check=False,
                                 timeout_s=60)
        return result.stdout

    def remove(self, target: RunTarget, process: Container | Detached) -> None:
        assert isinstance(process, Detached)
        if target.host.poll_detached(process).running:
            _stop(target.host, process)
        target.host.run(["rm", "-rf", process.state_dir], timeout_s=60)


NATIVE = NativeRunner()


def _stop(host: Host, process: Detached, grace_s: float = STOP_GRACE_S) -> None:
    """TERM (its supervisor passes it on), then KILL to its whole process group."""
    host.stop_detached(process)
    if host.wait_detached(process, timeout_s=grace_s).running:
        # the supervisor is a session leader (setsid): its group holds the harness too
        host.stop_detached(process, signal="KILL", reach="group")
        host.wait_detached(process, timeout_s=STOP_GRACE_S)


def _status(status: DetachedStatus) -> ContainerStatus:
    if status.lost:
        return ContainerStatus(running=False, exit_status=-1,
                               error="its process vanished without recording an exit status "
                                     "(killed together with its supervisor, or the host "
                                     "rebooted)")
    return ContainerStatus(running=status.running, exit_status=status.exit_status)
