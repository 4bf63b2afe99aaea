"""Docker engines on target hosts, driven by the docker CLI through the host's own transport.

Every call goes through `Host.run`, over our SSH session or locally, so an engine is reached the
same way as everything else on a host: no second connection, no daemon socket forwarded. The
engine's answers are translated here, once, into errors that name the host, the image and what
to do. Images are never pulled implicitly, and containers run without a network: a benchmark run
must not depend on one, and the engines of an offline lab have none to give. Containers subrun
starts carry labels, so a run's container is found again by its key after a reconnect or a
controller restart.

Why the CLI over the Host and not the docker SDK: the SDK talks to an engine's API on a
connection of its own (a unix socket on this machine, a tcp port, or `ssh://` through its own ssh
client), so each target would need its engine socket reachable from the controller, with a second
set of credentials and host-key checks beside our SSH session. The CLI on the target needs only
the session we already hold, `docker save | docker load` streams through it, and a local engine
and a remote one are one code path. So subrun does not depend on the SDK, and one `Engine` per
host (its settings, its login user, its architecture) runs every docker command.
"""

from __future__ import annotations

import json
import math
import re
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lab.config import DockerSettings, Mount
from lab.cores import core_list, pinned_cores
from lab.errors import CommandFailed, CommandTimedOut, ImageError
from lab.host import CommandResult, Host, OutputSink, Stdin

LABEL_MANAGED = "org.subrun.managed"
LABEL_RUN = "org.subrun.run"
LABEL_ONESHOT = "org.subrun.oneshot"
LABEL_CAMPAIGN = "org.subrun.campaign"  # the campaign a run container belongs to
# the highest CPU weight docker takes (cgroup v2: the top cpu.weight): on its pinned cores a
# run container wins against the other containers there
TOP_CPU_SHARES = 262144

# Output that means the object asked for is simply not there (a normal answer, not a fault).
_MISSING = re.compile(r"No such (image|object|container)|not found|does not exist", re.I)
_NO_CLI = re.compile(r"docker: (command )?not found|No such file or directory.*docker|"
                     r"could not start", re.I)
_NO_DAEMON = re.compile(r"Cannot connect to the Docker daemon|error during connect|"
                        r"permission denied while trying to connect|Is the docker daemon running",
                        re.I)
_NO_SPACE = re.compile(r"no space left on device", re.I)
_UNKNOWN_IMAGE = re.compile(r"pull access denied|manifest unknown|repository does not exist|"
                            r"No such image|unable to find image|not found: manifest", re.I)


class Engine:
    """One host's Docker engine: the docker CLI, run on the host through the Host contract."""

    def __init__(self, host: Host, settings: DockerSettings) -> None:
        self.host = host
        self.settings = settings
        self._user: str | None = None
        self._arch: str | None = None

    @property
    def env(self) -> dict[str, str] | None:
        return {"DOCKER_HOST": self.settings.docker_host} if self.settings.docker_host else None

    def docker(
        self,
        args: Sequence[str],
        *,
        what: str,
        timeout_s: float | None = 60,
        ok_if_missing: bool = False,
        stdin: Stdin = None,
        on_output: OutputSink | None = None,
    ) -> CommandResult:
        """Run `docker args` on the host; raise an ImageError naming host and `what` on failure."""
        self.require(what)
        result = self.host.run(["docker", *args], check=False, timeout_s=timeout_s,
                               env=self.env, stdin=stdin, on_output=on_output)
        if result.ok or (ok_if_missing and engine_fault(result) is None
                         and _MISSING.search(result.stderr)):
            return result
        raise engine_error(result, what)

    def require(self, what: str) -> None:
        """Refuse early when hosts.yaml says this host has no engine."""
        if not self.settings.engine:
            raise ImageError(
                f"Host '{self.host.name}' has `docker: {{engine: false}}` in hosts.yaml, so "
                f"{what} cannot run there. Install Docker on it and set `engine: true`, or run "
                "this benchmark natively."
            )

    def user(self) -> str:
        """uid:gid of the login user, so files a container writes to the run dir stay theirs
        (asked once per connection)."""
        if self._user is None:
            self._user = _USERS.get(self.host)
        if self._user is None:
            out = self.host.run(["sh", "-c", "echo $(id -u):$(id -g)"], timeout_s=30).stdout
            self._user = _USERS[self.host] = out.strip()
        return self._user

    def architecture(self) -> str:
        """The engine's CPU architecture as Docker reports it (x86_64, aarch64)."""
        if self._arch is None:
            out = self.docker(["info", "--format", "{{.Architecture}}"], what="docker info")
            self._arch = out.stdout.strip()
        return self._arch

    def image_id(self, ref: str) -> str | None:
        """The ID of image ref in this engine, or None when it has no such image."""
        result = self.docker(["image", "inspect", "--format", "{{.Id}}", ref],
                             what=f"looking up image '{ref}'", ok_if_missing=True)
        if not result.ok:
            return None
        return result.stdout.strip() or None


    # --- one-shot commands ---------------------------------------------------------------

    def oneshot(self, image: str, argv: Sequence[str], timeout_s: float, *, check: bool = True,
                mounts: Sequence[Mount] = ()) -> CommandResult:
        """Run a short command in a fresh container of image and return its result.

        The container is removed afterwards, also on timeout. A failure of the engine (no Docker,
        unknown image) raises ImageError; a non-zero exit of argv raises CommandFailed when check
        is set, and is returned otherwise.
        """
        name = f"subrun-oneshot-{uuid.uuid4().hex[:12]}"
        args = ["run", "--rm", "--pull", "never", "--name", name, "--network", "none",
                "--label", f"{LABEL_MANAGED}=1",
                "--label", f"{LABEL_ONESHOT}=1", *gpu_args(self.settings.gpus),
                *mount_args(mounts), image, *argv]
        what = f"a command in image '{image}'"
        self.require(what)
        try:
            result = self.host.run(["docker", *args], check=False, timeout_s=timeout_s,
                                   env=self.env)
        except CommandTimedOut:
            self.docker(["rm", "-f", name], what=f"removing {name}", ok_if_missing=True)
            raise
        if _docker_failed(result):
            raise engine_error(result, what)
        if check and not result.ok:
            raise CommandFailed(result, f"On host '{self.host.name}', `{' '.join(argv)}` in "
                                f"image '{image}' exited with status {result.exit_status}.\n"
                                f"--- last lines of its output ---\n{result.tail(15)}")
        return result

    # --- run containers ------------------------------------------------------------------

    def start(self, spec: ContainerSpec) -> Container:
        """Start spec detached; it outlives this connection and is found by its run key."""
        self.host.makedirs(spec.run_dir)
        what = f"starting the container of run {spec.run_key} from image '{spec.image}'"
        if self.find(spec.run_key) is not None:
            raise ImageError(f"On host '{self.host.name}', a container for run {spec.run_key} "
                             "already exists; reattach with Engine.find, or remove it first.")
        cores = pinned_cores(self.host, self.settings.cpuset, field="docker.cpuset")
        result = self.docker(container_args(spec, self.settings, self.user(), cores), what=what)
        return Container(self.host.name, result.stdout.strip()[:64], spec.name, spec.run_key,
                         spec.image)

    def find(self, run_key: str) -> Container | None:
        """The container of run_key, running or ended, or None."""
        fmt = "{{.ID}}\t{{.Names}}\t{{.Image}}"
        result = self.docker(
            ["ps", "--all", "--no-trunc", "--filter", f"label={LABEL_RUN}={run_key}",
             "--format", fmt], what=f"looking up the container of run {run_key}")
        lines = [line.split("\t") for line in result.stdout.splitlines() if line.strip()]
        if not lines:
            return None
        cid, name, image = lines[0]
        return Container(self.host.name, cid, name, run_key, image)

    def status(self, container: Container) -> ContainerStatus:
        """Whether the container still runs, or its exit status."""
        result = self.docker(
            ["inspect", "--format", '{"State": {{json .State}}, "Image": {{json .Image}}}',
             container.id], what=f"inspecting container {container.name}")
        found = json.loads(result.stdout)
        state, image_id = found["State"], found["Image"]
        if state.get("Running") or state.get("Status") in ("created", "restarting"):
            return ContainerStatus(running=True, exit_status=None, image_id=image_id)
        return ContainerStatus(running=False, exit_status=int(state.get("ExitCode", -1)),
                               oom_killed=bool(state.get("OOMKilled")),
                               error=state.get("Error", ""), image_id=image_id)

    def wait(self, container: Container, *, timeout_s: float) -> ContainerStatus:
        """Block until the container ends or timeout_s passes (then the status says running).

        One `docker wait` on the target, bounded there by `timeout`, instead of polling: the end
        of a run is seen at once and costs a single round trip."""
        limit = max(1, math.ceil(timeout_s))
        self.host.run(["timeout", str(limit), "docker", "wait", container.id], check=False,
                      timeout_s=limit + 60, env=self.env)
        return self.status(container)

    def logs(self, container: Container, *, tail: int | None = None) -> str:
        """What the container wrote to stdout and stderr (its last `tail` lines when given)."""
        args = ["logs", *(["--tail", str(tail)] if tail else []), container.id]
        result = self.docker(args, what=f"reading logs of {container.name}", timeout_s=120)
        return (result.stdout + result.stderr) if result.stderr else result.stdout

    def stop(self, container: Container, *, grace_s: int = 10) -> None:
        """Stop a running container (TERM, then KILL after grace_s)."""
        self.docker(["stop", "--time", str(grace_s), container.id],
                    what=f"stopping {container.name}", timeout_s=grace_s + 60,
                    ok_if_missing=True)

    def remove(self, container: Container) -> None:
        """Remove the container (stopping it first if it still runs); a missing one is fine."""
        self.docker(["rm", "--force", container.id], what=f"removing {container.name}",
                    ok_if_missing=True)

_USERS: weakref.WeakKeyDictionary[Host, str] = weakref.WeakKeyDictionary()


def engine_fault(result: CommandResult) -> str | None:
    """Why the engine itself (not the thing asked for) failed, or None."""
    text = result.stdout + "\n" + result.stderr
    if result.exit_status == 127 or _NO_CLI.search(text):
        return "no_cli"
    if _NO_DAEMON.search(text):
        return "no_daemon"
    if _NO_SPACE.search(text):
        return "no_space"
    return None


def engine_error(result: CommandResult, what: str) -> ImageError:
    """Translate a failed docker command into one paragraph an operator can act on."""
    host, tail = result.host, result.tail(15)
    shown = f"\n--- last lines of docker's output ---\n{tail}" if tail else ""
    fault = engine_fault(result)
    if fault == "no_cli":
        return ImageError(f"Host '{host}' has no docker command, so {what} cannot run there. "
                          "Install Docker on it, or set `docker: {engine: false}` for it in "
                          f"hosts.yaml.{shown}")
    if fault == "no_daemon":
        return ImageError(f"On host '{host}', no Docker engine answers, so {what} cannot run. "
                          "Start dockerd there, check that the login user may use it (group "
                          f"docker), or set `docker_host:` for it in hosts.yaml.{shown}")
    if fault == "no_space":
        return ImageError(f"On host '{host}', the Docker engine ran out of disk space during "
                          f"{what}. Free space under its data root (`docker system df`, remove "
                          f"unused images), then provision again.{shown}")
    if _UNKNOWN_IMAGE.search(result.stderr):
        return ImageError(f"On host '{host}', {what} failed: the engine does not have that "
                          "image. Provision it first (subrun builds or ships benchmark images), "
                          f"or load the base image into that engine.{shown}")
    return ImageError(f"On host '{host}', {what} failed: `{result.command}` exited with "
                      f"status {result.exit_status}.{shown}")


def _docker_failed(result: CommandResult) -> bool:
    """True when `docker run` itself failed (125, or no engine), not the command inside."""
    if engine_fault(result) in ("no_cli", "no_daemon"):
        return True
    return result.exit_status == 125 and "docker:" in result.stderr


def gpu_args(gpus: str | list[str] | None) -> list[str]:
    """The --gpus argument for `gpus: all` or a list of device ids, none for no GPUs."""
    if gpus is None:
        return []
    if gpus == "all":
        return ["--gpus", "all"]
    return ["--gpus", f'"device={",".join(gpus)}"']


def mount_args(mounts: Sequence[Mount]) -> list[str]:
    """Bind mounts; a missing source is an error (never silently created as an empty dir)."""
    args: list[str] = []
    for m in mounts:
        spec = f"type=bind,source={m.source},target={m.target}"
        args += ["--mount", spec + (",readonly" if m.read_only else "")]
    return args


@dataclass(frozen=True)
class ContainerSpec:
    """What a run's container is: image, command, its run directory and its identity."""

    image: str
    argv: tuple[str, ...]
    run_key: str
    run_dir: str  # directory on the host, mounted writable at run_mount
    run_mount: str  # where the run directory appears inside (the harness's cwd)
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()  # extra read-only mounts besides hosts.yaml's
    network: str = "none"  # "host" only for a run that must reach a service (a power server)

    @property
    def name(self) -> str:
        return f"subrun-{self.run_key}"


@dataclass(frozen=True)
class Container:
    """A handle on a started container: enough to find, wait for and remove it later."""

    host: str
    id: str
    name: str
    run_key: str
    image: str


@dataclass(frozen=True)
class ContainerStatus:
    """Whether a container still runs and, once it has ended, how."""

    running: bool
    exit_status: int | None
    oom_killed: bool = False
    error: str = ""  # the engine's reason when the command could not start
    image_id: str = ""  # the image the container runs (sha256:...), to record with the run


def cpuset_args(cores: Sequence[int]) -> list[str]:
    """Pin a container to cores with the top CPU weight there; none when cores is empty."""
    if not cores:
        return []
    return ["--cpuset-cpus", core_list(cores), "--cpu-shares", str(TOP_CPU_SHARES)]


def container_args(spec: ContainerSpec, settings: DockerSettings, user: str,
                   cores: Sequence[int] = ()) -> list[str]:
    """The `docker run` arguments for spec under one host's settings, pinned to cores when
    given (pure, for tests)."""
    args = ["run", "--detach", "--pull", "never", "--name", spec.name, "--network", spec.network,
            "--label", f"{LABEL_MANAGED}=1",
            "--label", f"{LABEL_RUN}={spec.run_key}", "--user", user,
            "--env", "HOME=/tmp", "--shm-size", settings.shm_size,
            "--workdir", spec.run_mount, *gpu_args(settings.gpus), *cpuset_args(cores)]
    for key, value in sorted(spec.labels.items()):
        args += ["--label", f"{key}={value}"]
    for key, value in sorted(spec.env.items()):
        args += ["--env", f"{key}={value}"]
    for name, limit in sorted(settings.ulimits.items()):
        args += ["--ulimit", f"{name}={limit}"]
    args += mount_args([*settings.mounts, *spec.mounts])
    args += mount_args([Mount(source=spec.run_dir, target=spec.run_mount, read_only=False)])
    return [*args, spec.image, *spec.argv]
