"""Benchmark images provisioned on the lab's hosts, as run targets for execution tests."""

from __future__ import annotations

from bench.manifest import load_manifest
from bench.target import RunTarget
from lab.config import Inventory
from lab.docker import Engine
from lab.provision import ProvisionOptions, provision
from lab.transport import open_host


def provisioned_target(inventory: Inventory, host: str, benchmark: str = "digits",
                       campaign: str = "tests") -> RunTarget:
    """A RunTarget for benchmark on host, its image built or shipped as hosts.yaml says."""
    config = inventory.host(host)
    manifest = load_manifest(benchmark)
    controller_config = inventory.host("local")
    controller = Engine(open_host(controller_config), controller_config.docker)
    connection = open_host(config)
    result = provision(Engine(connection, config.docker), manifest.image_spec(),
                       controller=controller, options=ProvisionOptions(pull_base=False))
    return RunTarget(host=connection, config=config, manifest=manifest, image=result.image,
                     image_id=result.image_id, campaign=campaign)
