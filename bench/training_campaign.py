"""A training campaign: its runs with their seeds, and where each set stands as runs land.

Each host is one system; each benchmark on it a set of M runs (M from `runs:`, else the
ruleset's N from mlperf-logging). Seeds are drawn by subrun once, distinct across the whole
campaign, and kept in `<store>/training-seeds.json` before any run starts, so a campaign started
again runs the same seeds and never a seed twice; each run's seed is also in its spec, so its
`run.json` in the store records it and its key differs from every other run's.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.campaign import Campaign
from bench.plan import PlannedRun
from bench.run import RunKind, RunRecord, RunSpec, Scenario
from bench.store import RunStore
from bench.submitted import passed
from bench.training_manifest import TrainingManifest
from bench.training_score import (
    FAILED,
    Selection,
    TimedRun,
    draw_seeds,
    olympic_score,
    required_runs,
    select_runs,
)
from bench.training_verdict import log_path
from lab.errors import ConfigError

SEEDS_FILE = "training-seeds.json"
DEFAULT_ESTIMATE_S = 60.0  # one run, before the store knows better
# a training run has no LoadGen scenario; the spec's field holds this placeholder, the label
# and the reports leave it out
NO_SCENARIO = Scenario.OFFLINE


@dataclass(frozen=True)
class SetPlan:
    """The runs of one benchmark on one system."""

    host: str
    benchmark: str  # the folder under images/
    official: str  # the Training benchmark it counts as
    required: int  # N: the ruleset's run count
    runs: tuple[PlannedRun, ...]  # M >= N, in launch order


def plan_sets(campaign: Campaign, manifests: dict[str, TrainingManifest], submitter: str,
              images: dict[tuple[str, str], str], store: RunStore) -> list[SetPlan]:
    """Every set of the campaign with its seeded runs (images: (host, benchmark) -> image id)."""
    seeds = _seeds(campaign, manifests, store.root / SEEDS_FILE)
    sets = []
    for host in campaign.hosts:
        for b in host.benchmarks:
            manifest = manifests[b.benchmark]
            n = required_runs(manifest.official_model, manifest.ruleset)
            runs = tuple(PlannedRun(_spec(campaign, manifest, host.host, i, seed, submitter,
                                          images.get((host.host, b.benchmark), "")),
                                    DEFAULT_ESTIMATE_S)
                         for i, seed in enumerate(seeds[host.host][b.benchmark]))
            sets.append(SetPlan(host.host, b.benchmark, manifest.official_model, n, runs))
    return sets


def run_count(campaign: Campaign, manifests: dict[str, TrainingManifest], host: str,
              benchmark: str) -> int:
    """M for one set: `runs:` when given (never fewer than the ruleset's N), else N."""
    manifest = manifests[benchmark]
    n = required_runs(manifest.official_model, manifest.ruleset)
    given = next(b.runs for h in campaign.hosts if h.host == host
                 for b in h.benchmarks if b.benchmark == benchmark)
    if given is not None and given < n:
        raise ConfigError(f"Campaign '{campaign.name}': hosts[{host}].benchmarks[{benchmark}]"
                          f".runs is {given}, but ruleset {manifest.ruleset} needs {n} runs of "
                          f"{manifest.official_model}; give at least {n}, or leave `runs:` out.")
    return given or n


def _spec(campaign: Campaign, manifest: TrainingManifest, host: str, index: int, seed: int,
          submitter: str, image: str) -> RunSpec:
    settings: dict[str, str | int | float] = {
        "run": index, "seed": seed, "submitter": submitter, "division": campaign.division,
        "quality_target": manifest.quality.target, "log_file": manifest.log_file,
        "global_batch_size": manifest.global_batch_size}
    return RunSpec(host=host, benchmark=manifest.name, model=manifest.official_model,
                   scenario=NO_SCENARIO, kind=RunKind.TRAINING, mode=campaign.mode,
                   round=manifest.ruleset, settings=settings, image_digest=image)


def _seeds(campaign: Campaign, manifests: dict[str, TrainingManifest],
           path: Path) -> dict[str, dict[str, list[int]]]:
    """The campaign's seeds: those kept in path, and new distinct ones for any run that has
    none yet (kept before they are used)."""
    kept: dict[str, dict[str, list[int]]] = json.loads(path.read_text()) if path.is_file() else {}
    taken = [s for per_host in kept.values() for seeds in per_host.values() for s in seeds]
    changed = False
    for host in campaign.hosts:
        for b in host.benchmarks:
            have = kept.setdefault(host.host, {}).setdefault(b.benchmark, [])
            want = run_count(campaign, manifests, host.host, b.benchmark)
            if len(have) < want:
                fresh = draw_seeds(want - len(have), taken)
                have.extend(fresh)
                taken.extend(fresh)
                changed = True
            kept[host.host][b.benchmark] = have[:want]
    if changed:
        _write_atomic(path, json.dumps(kept, indent=2) + "\n")
    return kept


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".seeds-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class SetStanding:
    """Where one set stands: its finished runs, the olympic score and the submitted runs."""

    done: int  # runs with a final record
    total: int  # M
    required: int  # N
    converged: int
    selection: Selection | None  # once N runs have ended
    provisional_min: float | None  # olympic score of the runs so far (3 or more), before N

    def describe(self) -> str:
        """One line for the CLI and the Prefect log."""
        head = f"{self.done}/{self.total} runs, {self.converged} converged"
        if self.selection is not None:
            if not self.selection.valid:
                return f"{head}; olympic score: INVALID (more failed runs than scoring drops)"
            return f"{head}; olympic score {_minutes(self.selection.score)}"
        if self.provisional_min is not None:
            return f"{head}; olympic score so far {_minutes(self.provisional_min)}"
        return f"{head}; olympic score after 3 runs"


def _minutes(score: float) -> str:
    return f"{score:.4f} min ({score * 60:.2f} s)"


def timed_runs(set_plan: SetPlan, store: RunStore) -> list[tuple[TimedRun, RunRecord]]:
    """The set's runs that have ended (finished or failed), as scoring sees them."""
    found = []
    for planned in set_plan.runs:
        record = store.standing(planned.spec.key) or store.latest(planned.spec.key)
        if record is None or record.state not in ("finished", "failed"):
            continue
        minutes = record.verdict.metrics.get("time_to_train_min") if record.verdict else None
        time = minutes if passed(record) and minutes is not None else FAILED
        found.append((TimedRun(planned.label, record.started_at, time), record))
    return found


def standing(set_plan: SetPlan, store: RunStore) -> SetStanding:
    """The set's score from the store as it is now."""
    ended = timed_runs(set_plan, store)
    runs = [t for t, _ in ended]
    converged = sum(not math.isinf(t.time_to_train) for t in runs)
    selection = select_runs(runs, set_plan.required, set_plan.official) \
        if len(runs) >= set_plan.required else None
    provisional = None
    if selection is None and len(runs) >= 3:
        score = olympic_score([t.time_to_train for t in runs], set_plan.official)
        provisional = None if math.isinf(score) else score
    return SetStanding(len(runs), len(set_plan.runs), set_plan.required, converged, selection,
                       provisional)


def submitted_logs(set_plan: SetPlan, store: RunStore) -> list[Path]:
    """The mllog files of the set's submitted runs (the median window), in launch order; a run
    that failed before it wrote a log has none, and the package then lacks a result."""
    ended = dict((t.run_id, r) for t, r in timed_runs(set_plan, store))
    selection = standing(set_plan, store).selection
    if selection is None:
        return []
    logs = []
    for run in selection.runs:
        record = ended[run.run_id]
        log = log_path(store.path(record.key, record.attempt), record.spec)
        if log.is_file():
            logs.append(log)
    return logs


def refuse_native(campaign: Campaign, docker_hosts: set[str]) -> None:
    """Training benchmarks run in their image: a host without a Docker engine is refused."""
    native = [h.host for h in campaign.hosts if h.host not in docker_hosts]
    if native:
        raise ConfigError(f"Campaign '{campaign.name}': host(s) {', '.join(native)} have no "
                          "Docker engine (`docker: {engine: false}`); training benchmarks run "
                          "in their image only. Give the host an engine or leave it out.")
