"""The Docker engine of a node, from `docker version` and `docker info` (JSON format)."""

from __future__ import annotations

import json

from collectors.command import Facts, run_probe, why_failed
from lab.config import DockerSettings
from lab.host import Host

VERSION = ("docker", "version", "--format", "{{json .}}")
INFO = ("docker", "info", "--format", "{{json .}}")


class DockerEngine(Facts):
    """What the engine reports about itself; `gap` says why it could not be asked."""

    server_version: str | None = None
    containerd: str | None = None
    runc: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    cgroup_version: str | None = None
    gap: str | None = None

    @property
    def text(self) -> str | None:
        """E.g. "Docker 27.3.1 (containerd 1.7.22, runc 1.1.14, runtime nvidia)"."""
        if not self.server_version:
            return None
        parts = [f"containerd {self.containerd}" if self.containerd else "",
                 f"runc {self.runc}" if self.runc else "",
                 f"runtime {self.default_runtime}" if self.default_runtime not in (None, "runc")
                 else ""]
        extra = ", ".join(p for p in parts if p)
        return f"Docker {self.server_version}" + (f" ({extra})" if extra else "")


def collect(host: Host, settings: DockerSettings) -> DockerEngine:
    """Ask the engine the host's benchmark containers run on."""
    if not settings.engine:
        return DockerEngine(gap="no Docker engine used on this host (native runs)")
    env = {"DOCKER_HOST": settings.docker_host} if settings.docker_host else None
    version = run_probe(host, VERSION, env=env)
    if not version.ok:
        return DockerEngine(gap=why_failed(version))
    info = run_probe(host, INFO, env=env)
    return parse(version.stdout, info.stdout if info.ok else "")


def parse(version_text: str, info_text: str = "") -> DockerEngine:
    """Build DockerEngine from `docker version` and `docker info` with `--format '{{json .}}'`."""
    server = (json.loads(version_text) if version_text.strip() else {}).get("Server") or {}
    components = {c.get("Name"): c.get("Version") for c in server.get("Components") or []}
    info = json.loads(info_text) if info_text.strip() else {}
    return DockerEngine(
        server_version=server.get("Version") or info.get("ServerVersion"),
        containerd=components.get("containerd"),
        runc=components.get("runc"),
        runtimes=tuple(sorted(info.get("Runtimes") or {})),
        default_runtime=info.get("DefaultRuntime"),
        cgroup_version=info.get("CgroupVersion"),
        gap=None if server or info else "docker answered with nothing",
    )
