"""The machine around the processors: board or product name, firmware, power management, filesystem.

Read from files any user may read (DMI ids, the device tree, cpufreq), so no root is needed.
"""

from __future__ import annotations

import re

from collectors.command import Facts, output_or_empty, run_probe
from lab.host import Host

# key=value lines; read by `parse`. $1 is the directory whose filesystem is reported.
SCRIPT = r"""
r() { [ -r "$2" ] && printf '%s=%s\n' "$1" "$(tr -d '\000' < "$2" | head -n 1)"; }
r vendor /sys/class/dmi/id/sys_vendor
r product /sys/class/dmi/id/product_name
r bios_vendor /sys/class/dmi/id/bios_vendor
r bios_version /sys/class/dmi/id/bios_version
r bios_date /sys/class/dmi/id/bios_date
r board /proc/device-tree/model
r governor /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor
r cpufreq_driver /sys/devices/system/cpu/cpu0/cpufreq/scaling_driver
printf 'filesystem=%s\n' "$(findmnt -n -o FSTYPE --target "$1" 2>/dev/null ||
  df -PT "$1" 2>/dev/null | awk 'NR==2 {print $2}')"
"""
_PLACEHOLDERS = re.compile(r"^(To be filled by O\.E\.M\.|Default string|System Product Name|"
                           r"Not Specified|None|)$", re.I)


class MachineInfo(Facts):
    """Product, firmware and power-management facts of a node."""

    vendor: str | None = None
    product: str | None = None
    bios_version: str | None = None
    bios_date: str | None = None
    board: str | None = None
    governor: str | None = None
    cpufreq_driver: str | None = None
    filesystem: str | None = None

    @property
    def product_text(self) -> str | None:
        """E.g. "Dell Inc. PowerEdge R760", or the device-tree model of a board."""
        if self.board:
            return self.board
        return " ".join(p for p in (self.vendor, self.product) if p) or None

    @property
    def firmware_text(self) -> str | None:
        """E.g. "BIOS 2.1.5 (03/14/2024)"."""
        if not self.bios_version:
            return None
        return f"BIOS {self.bios_version}" + (f" ({self.bios_date})" if self.bios_date else "")

    @property
    def power_management_text(self) -> str | None:
        """E.g. "cpufreq governor performance (intel_pstate)"."""
        if not self.governor:
            return None
        driver = f" ({self.cpufreq_driver})" if self.cpufreq_driver else ""
        return f"cpufreq governor {self.governor}{driver}"


def collect(host: Host, path: str = "/") -> MachineInfo:
    """Read DMI, device-tree, cpufreq and the filesystem type of path on host."""
    return parse(output_or_empty(run_probe(host, ("sh", "-c", SCRIPT, "sh", path))))


def parse(text: str) -> MachineInfo:
    """Build MachineInfo from SCRIPT's key=value lines; vendor placeholders count as unknown."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        value = value.strip()
        if sep and key in MachineInfo.model_fields and not _PLACEHOLDERS.match(value):
            fields[key] = value
    return MachineInfo(**fields)
