"""What a campaign has running on a lab host, as `docker ps` there lists it."""

from __future__ import annotations

from lab.config import Inventory
from lab.host import Host
from lab.transport import open_host


def campaign_containers(host: Host, campaign: str) -> list[str]:
    """The names of the campaign's containers running on host (`subrun-<campaign>-<run>-a<n>`)."""
    found = host.run(["docker", "ps", "--filter", f"name=subrun-{campaign}-",
                      "--format", "{{.Names}}"], timeout_s=60).stdout
    return found.split()


def containers_on(inventory: Inventory, host: str, campaign: str) -> list[str]:
    """The same over a connection of its own (for a test that asks once or twice)."""
    connection = open_host(inventory.host(host))
    try:
        return campaign_containers(connection, campaign)
    finally:
        connection.close()


def left_on(inventory: Inventory, host: str, campaign: str) -> list[str]:
    """Every container of the campaign on host, running or exited (`docker ps --all`): what a
    campaign that ended must not leave behind."""
    connection = open_host(inventory.host(host))
    try:
        return connection.run(["docker", "ps", "--all", "--filter",
                               f"label=org.subrun.campaign={campaign}", "--format",
                               "{{.Names}} {{.Status}}"], timeout_s=60).stdout.splitlines()
    finally:
        connection.close()
