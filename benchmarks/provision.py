"""Provisioning cost on the test lab: first provision, unchanged re-provision, bytes per host.

    .venv/bin/python benchmarks/provision.py [--benchmark digits] [--hosts local,h2,h3]

For each host the benchmark's image chain is provisioned under a throwaway name with a fresh
build argument and `--no-cache`, so the first provision is cold (every layer built; for a ship
host, built on the controller, saved and streamed over SSH), then provisioned again unchanged.
The controller's wheel cache is used as it is (it is filled once per requirements file).
Budget: an unchanged re-provision takes at most 2 s per host and sends nothing. The throwaway
images and their saved archive are removed afterwards; no other image is touched.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.manifest import load_manifest  # noqa: E402
from lab.config import load_inventory  # noqa: E402
from lab.docker import Engine  # noqa: E402
from lab.images import DEFAULT_CACHE, ImageSpec  # noqa: E402
from lab.provision import ProvisionOptions, ProvisionResult, provision  # noqa: E402
from lab.transport import open_host  # noqa: E402

LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
REPROVISION_BUDGET_S = 2.0


def throwaway(spec: ImageSpec, nonce: str) -> ImageSpec:
    """spec's chain under names of its own, with a build argument that makes its tags unique."""
    parent = throwaway(spec.parent, nonce) if spec.parent else None
    return replace(spec, name=f"bench-{nonce}-{spec.name}", parent=parent,
                   build_args=(*spec.build_args, ("SUBRUN_BENCH_NONCE", nonce)))


def engine_for(name: str, base_image: str) -> Engine:
    config = load_inventory(LAB / "hosts.yaml").host(name)
    settings = config.docker
    if settings.base_image is None:  # the lab has no registry: build from its own base
        settings = settings.model_copy(update={"base_image": base_image})
    return Engine(open_host(config), settings)


class BuiltLayers(logging.Handler):
    """Collects the IDs the classic builder prints (` ---> <id>`) while building throwaways."""

    STEP_ID = re.compile(r"^ ---> ([0-9a-f]{12})$")

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 3 and str(args[1]).startswith("bench-") and (
                match := self.STEP_ID.match(str(args[2]))):
            self.ids.add(match.group(1))


def remove(engine: Engine, spec: ImageSpec, built: BuiltLayers) -> None:
    """Remove the throwaway chain's tags, then the untagged images its builds left behind."""
    for step in spec.chain:
        listed = engine.docker(["image", "ls", "--format", "{{.Repository}}:{{.Tag}}",
                                step.repository], what="listing").stdout.split()
        if listed:
            engine.docker(["image", "rm", "--force", *listed], what="removing throwaway images")
    for image_id in sorted(built.ids):
        tags = engine.host.run(["docker", "image", "inspect", "--format", "{{len .RepoTags}}",
                                image_id], check=False, env=engine.env)
        if tags.ok and tags.stdout.strip() == "0":  # never a tagged image (the base is tagged)
            engine.host.run(["docker", "image", "rm", image_id], check=False, env=engine.env)
    for archive in (DEFAULT_CACHE / "archives").glob(f"subrun_{spec.name}-*.tar"):
        archive.unlink()


def measure(host: str, spec: ImageSpec, base_image: str) -> tuple[ProvisionResult,
                                                                      ProvisionResult]:
    engine, controller = engine_for(host, base_image), engine_for("local", base_image)
    cold = ProvisionOptions(pull_base=False, no_cache=True)
    built = BuiltLayers()
    logging.getLogger("subrun.docker").addHandler(built)
    logging.getLogger("subrun.docker").setLevel(logging.INFO)
    try:
        first = provision(engine, spec, controller=controller, options=cold)
        again = provision(engine, spec, controller=controller,
                          options=replace(cold, no_cache=False))
    finally:
        logging.getLogger("subrun.docker").removeHandler(built)
        remove(engine, spec, built)
        if engine.settings.provision == "ship":
            remove(controller, spec, built)
    return first, again


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="digits")
    parser.add_argument("--hosts", default="local,h2,h3")
    parser.add_argument("--base-image", default="subrun/debian:bookworm")
    args = parser.parse_args()
    manifest = load_manifest(args.benchmark)
    print(f"benchmark {args.benchmark}: first provision cold (--no-cache), then unchanged")
    print(f"{'host':6} {'mode':6} {'first s':>8} {'first MB sent':>14} "
          f"{'again s':>8} {'again bytes':>12}  budget")
    ok = True
    for host in args.hosts.split(","):
        spec = throwaway(manifest.image_spec(), uuid.uuid4().hex[:8])
        first, again = measure(host, spec, args.base_image)
        mode = "ship" if first.shipped else "build"
        within = again.unchanged and again.bytes_sent == 0 and \
            again.duration_s <= REPROVISION_BUDGET_S
        ok &= within
        print(f"{host:6} {mode:6} {first.duration_s:8.1f} {first.bytes_sent / 1e6:14.1f} "
              f"{again.duration_s:8.2f} {again.bytes_sent:12d}  "
              f"{'ok' if within else 'OVER'} (<= {REPROVISION_BUDGET_S:g} s, 0 bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
