"""Open the right Host for an inventory entry."""

from __future__ import annotations

from lab.config import HostConfig
from lab.host import Host
from lab.local import LocalHost


def open_host(config: HostConfig) -> Host:
    """A LocalHost or an SshHost for config; SSH connects lazily on first use."""
    if config.transport == "local":
        return LocalHost(config.name, config.work_dir, int(config.limits.output_max_bytes))
    from lab.ssh import SshHost

    return SshHost(config)
