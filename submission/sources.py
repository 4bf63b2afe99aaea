"""Adapters from the project's own parts to what assembly reads: the run store, benchmark
manifests, the campaign and its round's rules."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.campaign import Campaign
from bench.manifest import Manifest
from bench.rules import RoundRules
from bench.run import RUN_MOUNT, RunKind, RunSpec
from bench.store import RunStore
from lab.images import context_files, find_images_dir
from submission.assemble import TreeRequest
from submission.inputs import BenchmarkInput, StoredRun, SystemInput
from submission.layout import Style


def stored_runs(store: RunStore) -> list[StoredRun]:
    """Every attempt of every run in the store (assembly picks the latest passing ones); a
    tuning probe is information for its tuning record, never a result or a run of the report."""
    keys = store.keys()
    return [StoredRun(record, store.path(key, record.attempt))
            for key in keys for record in store.attempts(key)
            if record.spec.kind is not RunKind.TUNING]


def benchmark_input(manifest: Manifest, images_dir: Path | None = None) -> BenchmarkInput:
    """What the tree shows of a benchmark: model names, build contexts, commands, measurements."""
    spec = manifest.image_spec(images_dir or find_images_dir())
    chain = spec.chain
    digest = hashlib.sha256()
    for image in chain:
        for name, path in context_files(image):
            digest.update(f"{image.name}/{name}\0".encode())
            digest.update(path.read_bytes())

    def command(run: RunSpec) -> str:
        argv = manifest.run_argv(run.scenario, run.kind)
        return (f"docker run --rm -v <run dir>:{RUN_MOUNT} -w {RUN_MOUNT} "
                f"{spec.repository}@{run.image_digest or '<digest>'} {shlex.join(argv)}")

    return BenchmarkInput(
        name=manifest.name, model=manifest.official_model,
        open_name=manifest.tree_model if manifest.open else None,
        contexts=tuple((image.name, image.context_dir) for image in chain),
        version=digest.hexdigest()[:16], implementation=manifest.submission.implementation,
        measurements={str(k): v for k, v in manifest.submission.measurements.items()},
        notes=manifest.submission.notes,
        command=command)


def tree_request(campaign: Campaign, rules: RoundRules, submitter: str) -> TreeRequest:
    """Where and how to build the campaign's tree under its round's rules."""

    def tests(model: str) -> list[str]:
        return [kind.value for kind in (rules.model(model).compliance or ())]

    return TreeRequest(root=campaign.paths.tree, division=campaign.division, submitter=submitter,
                       round=rules.round, style=Style(rules.layout), required_tests=tests,
                       accuracy_misses=campaign.accuracy_misses_in_tree)


def system_input(host: str, system: Mapping[str, Any], system_id: str | None = None,
                 power_yaml: str | None = None) -> SystemInput:
    """A collected system description (collectors' SystemDescription.system) for the tree."""
    return SystemInput(system_id=system_id or host, description=dict(system),
                       power_yaml=power_yaml)
