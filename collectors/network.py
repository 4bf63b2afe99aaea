"""Network cards: the physical interfaces under /sys/class/net, with ethtool where present.

An interface is a card port when it has a `device` link (loopback, bridges, veth, docker0 and
tunnels do not). sysfs gives type, speed and driver without any tool; `ethtool -i` adds the
firmware version, and `ethtool IFACE` the speed when sysfs does not know it.
"""

from __future__ import annotations

import re
from collections import Counter

from collectors.command import Facts, output_or_empty, run_probe
from lab.host import Host

# One line per interface, key=value pairs without spaces; read by `parse_sysfs`.
SYSFS_SCRIPT = r"""
for d in /sys/class/net/*; do
  [ -e "$d" ] || continue
  n=${d##*/}
  drv=; [ -e "$d/device/driver" ] && drv=$(basename "$(readlink "$d/device/driver")")
  phys=0; [ -e "$d/device" ] && phys=1
  wifi=0; [ -e "$d/wireless" ] || [ -e "$d/phy80211" ] && wifi=1
  echo "iface=$n type=$(cat "$d/type" 2>/dev/null) operstate=$(cat "$d/operstate" 2>/dev/null)" \
       "carrier=$(cat "$d/carrier" 2>/dev/null) speed=$(cat "$d/speed" 2>/dev/null)" \
       "physical=$phys wireless=$wifi driver=$drv"
done
"""
SYSFS = ("sh", "-c", SYSFS_SCRIPT)
ETHTOOL = "ethtool"
_KINDS = {1: "Ethernet", 32: "InfiniBand"}


class Nic(Facts):
    """One physical network interface (a card port)."""

    name: str
    kind: str = "Ethernet"
    speed_mbit: int | None = None
    up: bool = False
    connected: bool = False
    driver: str | None = None
    firmware: str | None = None

    @property
    def text(self) -> str:
        speed = _speed_text(self.speed_mbit)
        return f"{speed + ' ' if speed else ''}{self.kind}" + (f" ({self.driver})"
                                                              if self.driver else "")


class NetworkInfo(Facts):
    """The card ports of a node."""

    nics: tuple[Nic, ...] = ()

    @property
    def networking_text(self) -> str | None:
        """E.g. "2x 10 Gb/s Ethernet (i40e), 1x 200 Gb/s InfiniBand (mlx5_core)"."""
        # Ports of one kind and driver are one card model; a port without link shows no
        # speed, so the group takes the fastest speed any of its ports reports.
        groups: dict[tuple[str, str | None], list[Nic]] = {}
        for nic in self.nics:
            groups.setdefault((nic.kind, nic.driver), []).append(nic)
        texts = []
        for ports in groups.values():
            fastest = max(ports, key=lambda n: n.speed_mbit or 0)
            texts.append(f"{len(ports)}x {fastest.text}")
        return ", ".join(texts) or None

    @property
    def types_text(self) -> str | None:
        """E.g. "2x i40e, 1x mlx5_core", for the power `number_of_type_nics_installed` key."""
        groups = Counter(n.driver or n.kind for n in self.nics)
        return ", ".join(f"{count}x {name}" for name, count in groups.items()) or None

    @property
    def max_speed_mbit(self) -> int | None:
        return max((n.speed_mbit for n in self.nics if n.speed_mbit), default=None)


def collect(host: Host) -> NetworkInfo:
    """Read /sys/class/net on host, then ask ethtool about each physical interface."""
    info = parse_sysfs(output_or_empty(run_probe(host, SYSFS)))
    nics = []
    for nic in info.nics:
        driver_info = run_probe(host, (ETHTOOL, "-i", nic.name))
        if not driver_info.ok:  # no ethtool here: sysfs is all there is
            return info
        link = "" if nic.speed_mbit else output_or_empty(run_probe(host, (ETHTOOL, nic.name)))
        nics.append(with_ethtool(nic, driver_info.stdout, link))
    return NetworkInfo(nics=tuple(nics))


def parse_sysfs(text: str) -> NetworkInfo:
    """The physical interfaces in the output of SYSFS_SCRIPT."""
    nics = []
    for line in text.splitlines():
        fields = dict(pair.partition("=")[::2] for pair in line.split())
        link_type = _int(fields.get("type"))
        # Only Ethernet (incl. Wi-Fi) and InfiniBand ports; CAN buses and the like are not NICs.
        if fields.get("physical") != "1" or "iface" not in fields or link_type not in _KINDS:
            continue
        kind = "Wi-Fi" if fields.get("wireless") == "1" else _KINDS[link_type]
        nics.append(Nic(
            name=fields["iface"],
            kind=kind,
            speed_mbit=_speed(fields.get("speed")),
            up=fields.get("operstate") == "up",
            connected=fields.get("carrier") == "1",
            driver=fields.get("driver") or None,
        ))
    return NetworkInfo(nics=tuple(nics))


def with_ethtool(nic: Nic, driver_text: str, link_text: str = "") -> Nic:
    """nic completed from `ethtool -i IFACE` (driver, firmware) and `ethtool IFACE` (speed)."""
    fields = dict(line.partition(":")[::2] for line in driver_text.splitlines())
    firmware = fields.get("firmware-version", "").strip()
    speed = re.search(r"^\s*Speed:\s*(\d+)\s*Mb/s", link_text, re.M)
    return nic.model_copy(update={
        "driver": nic.driver or fields.get("driver", "").strip() or None,
        "firmware": firmware if firmware and firmware != "N/A" else None,
        "speed_mbit": nic.speed_mbit or (int(speed.group(1)) if speed else None),
    })


def _speed(text: str | None) -> int | None:
    value = _int(text)
    return value if value and 0 < value < 10**7 else None  # -1 or 2^32-1: down or unknown


def _speed_text(mbit: int | None) -> str:
    if not mbit:
        return ""
    return f"{mbit / 1000:g} Gb/s" if mbit >= 1000 else f"{mbit} Mb/s"


def _int(text: str | None) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None
