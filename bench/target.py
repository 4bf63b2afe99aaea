"""One run's attempt on its target: prepare the run directory, start, reattach, collect.

Each attempt gets a fresh run directory on the target (`<work_dir>/runs/<run id>/`), so an
audit.config left behind by a crashed compliance run can never reach a later run: only a
compliance run's directory ever holds one. Collected files land locally before anything on the
target is removed.

Where the harness runs is a `Runner`: a labelled container on hosts with a Docker engine, or a
detached process in the benchmark's native environment (`bench.native`) on hosts with
`docker: {engine: false}`. The lifecycle here and in `bench.execute` is the same for both.
"""

from __future__ import annotations

import io
import math
import shlex
import shutil
import tarfile
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from bench import sampler
from bench.collect import collect_dir
from bench.manifest import Manifest
from bench.native import NATIVE
from bench.run import OUTPUT_DIR, RUN_MOUNT, RunKind, RunRecord, RunSpec, Verdict
from bench.store import RunStore
from bench.training_manifest import TrainingManifest, training_argv
from lab.config import HostConfig, Mount
from lab.docker import (
    LABEL_CAMPAIGN,
    Container,
    ContainerSpec,
    ContainerStatus,
    Engine,
)
from lab.errors import RunError
from lab.host import Detached, Host
from lab.native import map_paths

LABEL_SPEC = "org.subrun.spec"
ProcessEnd = ContainerStatus  # how a harness ended, in a container or as a native process


class RunWrap(Protocol):
    """A command an attempt's harness runs under, and the judgement it adds. The official power
    path is one: power-dev's client wraps the LoadGen runs in the container and its own check
    judges the output, while the attempt keeps the lifecycle of every other run."""

    @property
    def network(self) -> str:
        """The container's network ("host": the wrapper reaches a service)."""

    @property
    def mounts(self) -> tuple[Mount, ...]:
        """Extra read-only mounts, e.g. the power-dev checkout."""

    def argv(self, harness: list[str]) -> list[str]:
        """The container's command around the harness's."""

    def judge(self, store: RunStore, record: RunRecord, verdict: Verdict) -> Verdict:
        """The verdict of a collected attempt with the wrapper's own checks added."""


@dataclass(frozen=True)
class RunTarget:
    """A host ready for runs of one benchmark: the connection, its settings and the image."""

    host: Host
    config: HostConfig
    manifest: Manifest | TrainingManifest
    image: str  # the reference containers start from (a native environment's directory)
    image_id: str  # recorded in every run's spec
    campaign: str = "campaign"
    wrap: RunWrap | None = None
    # set when the campaign is cancelled: a wait that ends then leaves the attempt to the
    # canceller (which stops, collects and records it), and no new attempt starts
    cancelled: threading.Event | None = None

    @property
    def is_cancelled(self) -> bool:
        return self.cancelled is not None and self.cancelled.is_set()

    @property
    def runner(self) -> Runner:
        """Containers, or native processes on a host with `docker: {engine: false}`."""
        return CONTAINERS if self.config.docker.engine else NATIVE

    @property
    def engine(self) -> Engine:
        """The host's Docker engine, under its hosts.yaml settings."""
        return Engine(self.host, self.config.docker)


@dataclass(frozen=True)
class RunHandle:
    """A started attempt: its name on the target, and the container or native process running it."""

    attempt_name: str  # AttemptId.name(): the run directory's name, container label, process name
    process: Container | Detached

    @property
    def name(self) -> str:
        """The container's or the process's name on the host."""
        return self.process.name


class Runner(Protocol):
    """Where an attempt's harness runs on its host."""

    what: str  # how messages call it: "container", "native process"

    def paths(self, target: RunTarget, run_dir: str) -> Mapping[str, str]:
        """Image paths in the run's argv -> where they are for this runner (none: as they are)."""

    def start(self, target: RunTarget, rid: str, run_dir: str, argv: list[str],
              labels: Mapping[str, str]) -> Container | Detached:
        """Start argv detached with run_dir as its working directory, findable by rid."""

    def find(self, target: RunTarget, rid: str) -> Container | Detached | None:
        """The container or process of rid, running or ended, or None."""

    def wait(self, target: RunTarget, process: Container | Detached,
             timeout_s: float) -> ProcessEnd:
        """Wait for the end; past the deadline stop it and report it running."""

    def stop(self, target: RunTarget, process: Container | Detached, grace_s: float) -> None:
        """Stop it now: TERM, then KILL after grace_s (an ended one is left as it is)."""

    def output_tail(self, target: RunTarget, process: Container | Detached, lines: int) -> str:
        """The last lines it wrote to stdout and stderr."""

    def remove(self, target: RunTarget, process: Container | Detached) -> None:
        """Remove what is left of it on the host (stopping it if it still runs)."""


class ContainerRunner:
    """Attempts in labelled containers of the benchmark's image, found again by label."""

    what = "container"

    def paths(self, target: RunTarget, run_dir: str) -> Mapping[str, str]:
        return {}

    def start(self, target: RunTarget, rid: str, run_dir: str, argv: list[str],
              labels: Mapping[str, str]) -> Container:
        wrap = target.wrap
        return target.engine.start(ContainerSpec(
            image=target.image, argv=tuple(argv), run_key=rid, run_dir=run_dir,
            run_mount=RUN_MOUNT, labels=labels, mounts=wrap.mounts if wrap else (),
            network=wrap.network if wrap else "none"))

    def find(self, target: RunTarget, rid: str) -> Container | None:
        return target.engine.find(rid)

    def wait(self, target: RunTarget, process: Container | Detached,
             timeout_s: float) -> ProcessEnd:
        assert isinstance(process, Container)
        status = target.engine.wait(process, timeout_s=timeout_s)
        if status.running:
            target.engine.stop(process)
        return status

    def stop(self, target: RunTarget, process: Container | Detached, grace_s: float) -> None:
        assert isinstance(process, Container)
        target.engine.stop(process, grace_s=max(1, math.ceil(grace_s)))

    def output_tail(self, target: RunTarget, process: Container | Detached, lines: int) -> str:
        assert isinstance(process, Container)
        return target.engine.logs(process, tail=lines)

    def remove(self, target: RunTarget, process: Container | Detached) -> None:
        assert isinstance(process, Container)
        target.engine.remove(process)


CONTAINERS = ContainerRunner()


def remote_run_dir(target: RunTarget, rid: str) -> str:
    return str(PurePosixPath(target.config.work_dir) / "runs" / rid)


def container_argv(manifest: Manifest | TrainingManifest, spec: RunSpec,
                   paths: Mapping[str, str] | None = None) -> list[str]:
    """The command of the run (image paths mapped by paths, when given); an accuracy run
    scores its log right after; a training run trains with its seed."""
    if isinstance(manifest, TrainingManifest):
        return training_argv(manifest, spec)
    run = map_paths(manifest.run_argv(spec.scenario, spec.kind), paths or {})
    if spec.kind is not RunKind.ACCURACY:
        return run
    score = map_paths(manifest.score_argv(), paths or {})
    return ["sh", "-c", f"{shlex.join(run)} && {shlex.join(score)}"]


def start(target: RunTarget, record: RunRecord, files: dict[str, str],
          phase: str = "") -> RunHandle:
    """Write the run directory (user.conf, audit.config for compliance only) and start it."""
    spec = record.spec
    rid = record.id.name(target.campaign, phase)
    run_dir = remote_run_dir(target, rid)
    # one round trip: a fresh directory, its output folder, and the run's files from a tar
    target.host.run(["sh", "-c", 'rm -rf "$1" && mkdir -p "$1/$2" && tar -x -C "$1"', "sh",
                     run_dir, OUTPUT_DIR], stdin=_tar(files), timeout_s=60)
    runner = target.runner
    argv = container_argv(target.manifest, spec, runner.paths(target, run_dir))
    if target.wrap is not None:
        if runner is not CONTAINERS:
            raise RunError(f"{spec.label}: host '{target.config.name}' runs benchmarks natively, "
                           "but this run must be wrapped in a container (official power); give "
                           "the host a Docker engine (`docker: {engine: true}`).")
        argv = target.wrap.argv(argv)
    labels = {LABEL_CAMPAIGN: target.campaign, LABEL_SPEC: spec.label.replace("/", ".")}
    return RunHandle(rid, runner.start(target, rid, run_dir, argv, labels))


def _tar(files: Mapping[str, str]) -> bytes:
    """An uncompressed tar holding files (name -> text), for writing them in one go."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def find(target: RunTarget, record: RunRecord, phase: str = "") -> RunHandle | None:
    """The container or process of an attempt (or of one of its phases), if the target still
    has it (reattachment)."""
    rid = record.id.name(target.campaign, phase)
    process = target.runner.find(target, rid)
    return RunHandle(rid, process) if process is not None else None


def wait(target: RunTarget, handle: RunHandle, timeout_s: float) -> ProcessEnd:
    """Wait for the attempt to end; past the deadline it is stopped and reported running."""
    status = target.runner.wait(target, handle.process, timeout_s)
    # ended, or stopped at its deadline: either way it no longer loads the host (a wait cut
    # by a dropped link says nothing of the run, which may go on)
    _ENDED[target.host] = time.monotonic()
    return status


# when this controller last saw a run's workload end on a host (time.monotonic())
_ENDED: weakref.WeakKeyDictionary[Host, float] = weakref.WeakKeyDictionary()


def idle_s(target: RunTarget) -> float:
    """Seconds since a run's workload last ended on the target's host, as far as this
    controller knows; 0 when it saw none end there (another process's run may just have)."""
    ended = _ENDED.get(target.host)
    return 0.0 if ended is None else time.monotonic() - ended


def stop(target: RunTarget, handle: RunHandle, grace_s: float) -> None:
    """Stop the attempt now (TERM, KILL after grace_s); its files stay for collection."""
    target.runner.stop(target, handle.process, grace_s)


TAIL_MAX_CHARS = 64 * 1024  # of the harness's output kept in the run record


def collect(target: RunTarget, handle: RunHandle, local_dir: Path) -> str:
    """Copy the attempt's run directory to local_dir (checked and capped: `bench.collect`
    raises CollectionRefused for a hostile or malformed one); return the output tail."""
    run_dir = remote_run_dir(target, handle.attempt_name)
    collect_dir(target.host, run_dir, local_dir, target.config.limits)
    sampler.fetch(target.host, handle.attempt_name, local_dir)  # the trace, beside the run's files
    return target.runner.output_tail(target, handle.process, 40)[-TAIL_MAX_CHARS:]


# the run directory goes only while its output folder is empty: nothing ran in it
UNSTARTED_RM = '[ -z "$(ls -A "$1/$2" 2>/dev/null)" ] && rm -rf "$1"; [ ! -e "$1" ] && echo gone'


def forget_unstarted(target: RunTarget, record: RunRecord, phase: str = "") -> bool:
    """Remove the run directory of an attempt whose container or process is gone (a controller
    killed between writing the directory and starting it), unless its output folder holds
    anything: what a run wrote is left for a person to look at. True when none is left."""
    run_dir = remote_run_dir(target, record.id.name(target.campaign, phase))
    result = target.host.run(["sh", "-c", UNSTARTED_RM, "sh", run_dir, OUTPUT_DIR],
                             check=False, timeout_s=60)
    return result.stdout.strip() == "gone"


def discard(target: RunTarget, handle: RunHandle) -> None:
    """Remove the container or process and the run directory (only after collection)."""
    target.runner.remove(target, handle.process)
    target.host.run(["rm", "-rf", remote_run_dir(target, handle.attempt_name)], timeout_s=120)
    sampler.remove(target.host, handle.attempt_name)


def run_to_completion(target: RunTarget, record: RunRecord, phase: str, files: dict[str, str],
                      out_dir: Path, timeout_s: float) -> ProcessEnd:
    """Run one phase of an attempt (e.g. a power run's ranging pass) and collect its LoadGen
    logs flat into out_dir; the container or process and its directory are removed afterwards."""
    handle = start(target, record, files, phase)
    try:
        status = wait(target, handle, timeout_s)
        with tempfile.TemporaryDirectory(prefix="subrun-phase-") as tmp:
            collect(target, handle, Path(tmp))
            out_dir.mkdir(parents=True, exist_ok=True)
            for log in (Path(tmp) / OUTPUT_DIR).glob("mlperf_log_*"):
                if log.name != "mlperf_log_trace.json":
                    shutil.copyfile(log, out_dir / log.name)  # in chunks, not whole
    finally:
        discard(target, handle)
    return status
