"""Operating system and kernel, from /etc/os-release and `uname -srm`."""

from __future__ import annotations

import shlex

from collectors.command import Facts, output_or_empty, run_probe
from lab.host import Host

OS_RELEASE = ("cat", "/etc/os-release")
UNAME = ("uname", "-srm")


class OsInfo(Facts):
    """The distribution and kernel of a node (or of an image, for os-release alone)."""

    pretty_name: str | None = None
    distro_id: str | None = None
    version_id: str | None = None
    kernel: str | None = None  # e.g. "6.8.0-45-generic"
    machine: str | None = None  # e.g. "x86_64", "aarch64"

    @property
    def text(self) -> str | None:
        """E.g. "Ubuntu 22.04.4 LTS, kernel 5.15.0-105-generic"."""
        if not self.pretty_name:
            return f"Linux, kernel {self.kernel}" if self.kernel else None
        return self.pretty_name + (f", kernel {self.kernel}" if self.kernel else "")


def collect(host: Host) -> OsInfo:
    """Read os-release and uname on host."""
    return parse(output_or_empty(run_probe(host, OS_RELEASE)),
                 output_or_empty(run_probe(host, UNAME)))


def parse(os_release_text: str, uname_text: str = "") -> OsInfo:
    """Build OsInfo from /etc/os-release and `uname -srm` ("Linux 6.8.0-45-generic x86_64")."""
    fields = parse_os_release(os_release_text)
    pretty = fields.get("PRETTY_NAME") or " ".join(
        v for v in (fields.get("NAME"), fields.get("VERSION")) if v) or None
    parts = uname_text.split()
    return OsInfo(
        pretty_name=pretty,
        distro_id=fields.get("ID"),
        version_id=fields.get("VERSION_ID"),
        kernel=parts[1] if len(parts) >= 2 else None,
        machine=parts[2] if len(parts) >= 3 else None,
    )


def parse_os_release(text: str) -> dict[str, str]:
    """os-release's KEY=value lines, values unquoted as a shell would."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            try:
                fields[key] = " ".join(shlex.split(value))
            except ValueError:
                fields[key] = value.strip("\"'")
    return fields
