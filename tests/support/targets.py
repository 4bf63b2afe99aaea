"""Benchmark images provisioned on the lab's hosts, as run targets for execution tests."""

from __future__ import annotations

import uuid

from bench.manifest import load_manifest
from bench.target import RunTarget
from lab.config import Inventory
from lab.docker import Engine
from lab.provision import ProvisionOptions, provision
from lab.transport import open_host

# An Offline target above what the digits SUT reaches on a lab host, on any machine the lab runs
# on and on every core of it (measured: 300-520k samples/s on h2's pinned core and on unpinned
# h3 on one 2-core EPYC; 470-750k on h2's pinned core on another, where 600k left 1-s runs
# short of their duration, and about a third more on two cores), so LoadGen's
# 1.1 x target x min_duration samples outlast min_duration: the run is VALID and lasts at least
# that long (a 1-s run 2 to 5 s). LoadGen holds about 300 bytes per issued sample, so keep such
# runs to a few seconds (8 s: about 4 GB); a run meant to last longer uses Server, whose
# queries arrive over the duration.
OFFLINE_ABOVE_REACH_QPS = 1_500_000


def provisioned_target(inventory: Inventory, host: str, benchmark: str = "digits",
                       campaign: str | None = None) -> RunTarget:
    """A RunTarget for benchmark on host, its image built or shipped as hosts.yaml says. Its
    campaign name is unique unless one is given: runs of equal settings in two tests have equal
    keys, and tests in parallel workers would otherwise race for one container name on the host."""
    campaign = campaign or f"tests-{uuid.uuid4().hex[:8]}"
    config = inventory.host(host)
    manifest = load_manifest(benchmark)
    controller_config = inventory.host("local")
    controller = Engine(open_host(controller_config), controller_config.docker)
    connection = open_host(config)
    result = provision(Engine(connection, config.docker), manifest.image_spec(),
                       controller=controller, options=ProvisionOptions(pull_base=False))
    return RunTarget(host=connection, config=config, manifest=manifest, image=result.image,
                     image_id=result.image_id, campaign=campaign)
