"""Describe a host: run the collectors over its Host and merge the result with hosts.yaml.

This is the entry point the campaign flow and `subrun describe` call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collectors.detection import Value, detect, detected_fields
from collectors.system_json import SystemDescription, merge
from lab.config import Inventory
from lab.host import Host
from lab.transport import open_host


def describe_host(host: Host, inventory: Inventory, host_name: str, *,
                  images: Sequence[str] = (),
                  campaign: Mapping[str, Value] | None = None) -> SystemDescription:
    """The system description of an open host: detected facts, hosts.yaml, campaign fields."""
    config = inventory.host(host_name)
    facts = detect(host, config, images)
    return merge(detected_fields(facts), inventory, host_name, campaign=campaign)


def describe(inventory: Inventory, host_name: str, *, images: Sequence[str] = (),
             campaign: Mapping[str, Value] | None = None) -> SystemDescription:
    """Connect to the inventory's host_name, describe it, and close the connection."""
    with open_host(inventory.host(host_name)) as host:
        return describe_host(host, inventory, host_name, images=images, campaign=campaign)
