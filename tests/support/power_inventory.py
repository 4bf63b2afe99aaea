"""The lab's inventory with each host's analyzer said (`power: {analyzer: NAME}`), written to a
test's folder: power campaigns need it, and tests choose which host shares which analyzer."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from lab.config import Inventory
from lab.host import Detached
from lab.transport import open_host
from power.service import daemon_name, stop_daemon


def with_analyzers(lab_inventory: Path, folder: Path, analyzers: dict[str, str],
                   extra: list[dict[str, Any]] | None = None) -> Path:
    """A copy of lab_inventory where host -> analyzer as given (extra analyzers appended)."""
    data = yaml.safe_load(lab_inventory.read_text())
    for host in data["hosts"]:
        host.pop("power", None)
        if host["name"] in analyzers:
            host["power"] = {"analyzer": analyzers[host["name"]]}
    data["analyzers"] = [*data.get("analyzers", []), *(extra or [])]
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def stop_lab_daemon(inventory: Inventory, analyzer: str,
                    unless: Collection[Detached] = ()) -> None:
    """Stop the daemon a test's own analyzer started on the lab's host `local`, if it runs
    and is none of `unless`."""
    local = open_host(inventory.host("local"))
    try:
        daemon = local.find_detached(daemon_name(analyzer))
        if daemon is not None and daemon not in unless:
            stop_daemon(local, daemon)
    finally:
        local.close()


def running_lab_daemons(inventory: Inventory) -> set[Detached]:
    """The power daemons of the inventory's analyzers running on the lab's host `local`."""
    local = open_host(inventory.host("local"))
    try:
        found = (local.find_detached(daemon_name(a.name)) for a in inventory.analyzers)
        return {d for d in found if d is not None and local.poll_detached(d).running}
    finally:
        local.close()
