"""One run's container on its target: prepare the run directory, start, reattach, collect.

Each attempt gets a fresh run directory on the target (`<work_dir>/runs/<run id>/`), so an
audit.config left behind by a crashed compliance run can never reach a later run: only a
compliance run's directory ever holds one. Collected files land locally before anything on the
target is removed.
"""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bench.manifest import Manifest
from bench.run import OUTPUT_DIR, RUN_MOUNT, RunKind, RunRecord, RunSpec
from lab.config import HostConfig
from lab.docker import (
    Container,
    ContainerSpec,
    ContainerStatus,
    container_logs,
    find_container,
    remove_container,
    start_container,
    stop_container,
    wait_container,
)
from lab.host import Host

LABEL_CAMPAIGN = "org.subrun.campaign"
LABEL_SPEC = "org.subrun.spec"


@dataclass(frozen=True)
class RunTarget:
    """A host ready for runs of one benchmark: the connection, its settings and the image."""

    host: Host
    config: HostConfig
    manifest: Manifest
    image: str  # the reference containers start from
    image_id: str  # recorded in every run's spec
    campaign: str = "campaign"


def run_id(record: RunRecord) -> str:
    """The name of one attempt on the target: container label and run directory."""
    return f"{record.key}-a{record.attempt}"


def remote_run_dir(target: RunTarget, rid: str) -> str:
    return str(PurePosixPath(target.config.work_dir) / "runs" / rid)


def container_argv(manifest: Manifest, spec: RunSpec) -> list[str]:
    """The command of the run's container; an accuracy run scores its log right after."""
    run = manifest.run_argv(spec.scenario, spec.kind)
    if spec.kind is not RunKind.ACCURACY:
        return run
    return ["sh", "-c", f"{shlex.join(run)} && {shlex.join(manifest.score_argv())}"]


def start(target: RunTarget, record: RunRecord, files: dict[str, str]) -> Container:
    """Write the run directory (user.conf, audit.config for compliance only) and start it."""
    spec = record.spec
    rid = run_id(record)
    run_dir = remote_run_dir(target, rid)
    target.host.run(["rm", "-rf", run_dir], timeout_s=60)
    target.host.makedirs(f"{run_dir}/{OUTPUT_DIR}")
    with tempfile.TemporaryDirectory(prefix="subrun-run-") as tmp:
        for name, text in files.items():
            local = Path(tmp) / name
            local.write_text(text)
            target.host.put(local, f"{run_dir}/{name}")
    spec_label = spec.label.replace("/", ".")
    return start_container(target.host, target.config.docker, ContainerSpec(
        image=target.image, argv=tuple(container_argv(target.manifest, spec)), run_key=rid,
        run_dir=run_dir, run_mount=RUN_MOUNT,
        labels={LABEL_CAMPAIGN: target.campaign, LABEL_SPEC: spec_label}))


def find(target: RunTarget, record: RunRecord) -> Container | None:
    """The container of an attempt, if the target still has it (reattachment)."""
    return find_container(target.host, target.config.docker, run_id(record))


def wait(target: RunTarget, container: Container, timeout_s: float) -> ContainerStatus:
    """Wait for the container to end; past the deadline it is stopped and reported running."""
    status = wait_container(target.host, target.config.docker, container, timeout_s=timeout_s)
    if status.running:
        stop_container(target.host, target.config.docker, container)
    return status


def collect(target: RunTarget, container: Container, local_dir: Path) -> str:
    """Copy the attempt's run directory to local_dir; return the container's output tail."""
    run_dir = remote_run_dir(target, container.run_key)
    listing = target.host.run(["find", run_dir, "-type", "f"], timeout_s=120).stdout
    for remote in sorted(line for line in listing.splitlines() if line.strip()):
        relative = PurePosixPath(remote).relative_to(run_dir)
        target.host.get(remote, local_dir / relative)
    return container_logs(target.host, target.config.docker, container, tail=40)


def discard(target: RunTarget, container: Container) -> None:
    """Remove the container and its run directory (only after collection)."""
    remove_container(target.host, target.config.docker, container)
    target.host.run(["rm", "-rf", remote_run_dir(target, container.run_key)], timeout_s=120)


def run_to_completion(target: RunTarget, record: RunRecord, phase: str, files: dict[str, str],
                      out_dir: Path, timeout_s: float) -> ContainerStatus:
    """Run one phase of an attempt (e.g. a power run's ranging pass) and collect its LoadGen
    logs flat into out_dir; the container and its directory are removed afterwards."""
    phased = record.model_copy(update={"key": f"{record.key}-{phase}"})
    container = start(target, phased, files)
    try:
        status = wait(target, container, timeout_s)
        with tempfile.TemporaryDirectory(prefix="subrun-phase-") as tmp:
            collect(target, container, Path(tmp))
            out_dir.mkdir(parents=True, exist_ok=True)
            for log in (Path(tmp) / OUTPUT_DIR).glob("mlperf_log_*"):
                if log.name != "mlperf_log_trace.json":
                    (out_dir / log.name).write_bytes(log.read_bytes())
    finally:
        discard(target, container)
    return status
