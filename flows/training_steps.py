"""The steps of a training campaign, free of Prefect: each is one call into the layers below.

A training run goes through the same lifecycle as an inference run (`bench.execute`: a new
attempt in the store, a labelled detached container, reattached after a crash, collected, then
judged), with mlperf-logging's checkers as its judge. The flow in `flows/training.py` wraps each
step in a task.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from bench.campaign import Campaign
from bench.cancel import cancel_running
from bench.execute import ExecuteOptions, execute
from bench.plan import PlannedRun
from bench.rules import RoundRules, load_rules
from bench.run import Check, RunRecord
from bench.store import RunStore
from bench.submitted import passed
from bench.target import RunTarget
from bench.training_campaign import SetPlan, plan_sets, refuse_native, standing, submitted_logs
from bench.training_manifest import TrainingManifest, load_training_manifest
from bench.training_verdict import log_path
from collectors import cpu
from collectors.describe import describe_host
from collectors.training_system import training_system
from flows.context import HostConnections
from flows.steps import controller_engine
from lab.config import Inventory, load_inventory
from lab.cuts import through_cuts
from lab.docker import Engine
from lab.errors import ConfigError
from lab.host import Host
from lab.provision import ProvisionResult, provision
from submission.training_checker import (
    PackageVerdict,
    RcpStatus,
    check_package,
    rcp_status,
    summarize,
)
from submission.training_package import (
    Implementation,
    SystemResults,
    assemble_package,
    org_dir,
)


@dataclass
class TrainingContext:
    """The loaded, validated inputs of one training campaign run."""

    campaign: Campaign
    inventory: Inventory
    manifests: dict[str, TrainingManifest]
    store: RunStore
    rules: RoundRules  # the lifecycle's signature asks for one; training runs do not read it
    submitter: str
    sets: list[SetPlan] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    connections: HostConnections = field(init=False)

    def __post_init__(self) -> None:
        self.connections = HostConnections(self.inventory)

    def host(self, name: str) -> Host:
        """The open connection to a host of the inventory (opened on first use)."""
        return self.connections.get(name)

    def close(self) -> None:
        self.connections.close()

    def runs_of(self, host: str) -> list[PlannedRun]:
        return [r for s in self.sets if s.host == host for r in s.runs]

    def set_of(self, planned: PlannedRun) -> SetPlan:
        return next(s for s in self.sets if planned in s.runs)


def load_training_context(campaign: Campaign) -> TrainingContext:
    """Load what the campaign names and plan its sets; ConfigError for anything wrong."""
    inventory = load_inventory(campaign.inventory)
    for h in campaign.hosts:
        inventory.host(h.host)  # an unknown host name fails here, with a suggestion
    refuse_native(campaign, {h.name for h in inventory.hosts if h.docker.engine})
    names = sorted({b.benchmark for h in campaign.hosts for b in h.benchmarks})
    manifests = {n: load_training_manifest(n) for n in names}
    submitter = campaign.submitter or inventory.system_defaults.get("submitter")
    if not submitter:
        raise ConfigError("No submitter: set `submitter:` in the campaign file or "
                          "`system_defaults.submitter` in hosts.yaml.")
    store = RunStore(campaign.paths.store)
    ctx = TrainingContext(campaign, inventory, manifests, store, load_rules(campaign.round),
                          str(submitter))
    ctx.sets = plan_sets(campaign, manifests, ctx.submitter, {}, store)  # checks run counts
    return ctx


def provision_host(ctx: TrainingContext, host: str) -> dict[str, ProvisionResult]:
    """Every training image the host needs, present on it (unchanged ones cost nothing)."""
    config = ctx.inventory.host(host)

    def step() -> dict[str, ProvisionResult]:
        engine = Engine(ctx.host(host), config.docker)
        controller = controller_engine(ctx.inventory, ctx.campaign.inventory) \
            if config.docker.provision == "ship" else None
        return {b.benchmark: provision(engine, ctx.manifests[b.benchmark].image_spec(),
                                       controller=controller)
                for h in ctx.campaign.hosts if h.host == host for b in h.benchmarks}

    return through_cuts(step)


def bind_images(ctx: TrainingContext, images: dict[str, dict[str, ProvisionResult]]) -> None:
    """Fix every run's image: the final run keys (the seeds stay as kept)."""
    ids = {(h, b): r.image_id for h, per in images.items() for b, r in per.items()}
    ctx.sets = plan_sets(ctx.campaign, ctx.manifests, ctx.submitter, ids, ctx.store)


def describe(ctx: TrainingContext, host: str,
             images: dict[str, ProvisionResult]) -> dict[str, str]:
    """The host's Training system description (the inference collectors, plus vCPUs)."""
    campaign = {"division": ctx.campaign.division, "submitter": ctx.submitter}
    description = through_cuts(lambda: describe_host(
        ctx.host(host), ctx.inventory, host, images=[r.image for r in images.values()],
        campaign=campaign))
    return training_system(description.system, through_cuts(lambda: cpu.collect(ctx.host(host))))


def run(ctx: TrainingContext, planned: PlannedRun,
        images: dict[str, ProvisionResult]) -> RunRecord:
    """Execute one training run on its host (reused, reattached or started)."""
    spec = planned.spec
    ctx.host(spec.host).ensure_reachable()
    image = images[spec.benchmark]
    target = RunTarget(ctx.host(spec.host), ctx.inventory.host(spec.host),
                       ctx.manifests[spec.benchmark], image.image, image.image_id,
                       ctx.campaign.name, cancelled=ctx.cancelled)
    # a run that did not converge is a result, never re-run: olympic scoring counts it
    return execute(target, planned, ctx.store, ctx.rules, options=ExecuteOptions(max_reruns=0))


@dataclass(frozen=True)
class Feedback:
    """What a person wants to know the moment a training run lands."""

    label: str
    passed: bool
    line: str  # the run: verdict, seed, time to train, epochs
    standing: str  # its set: runs so far, olympic score
    rcp: RcpStatus


def feedback(ctx: TrainingContext, planned: PlannedRun, record: RunRecord) -> Feedback:
    """The run's verdict and where its set stands now."""
    verdict = record.verdict
    metrics = verdict.metrics if verdict else {}
    seed = planned.spec.settings["seed"]
    if verdict is None:
        line = f"{record.state} (seed {seed}): {record.error or 'no verdict'}"
    else:
        ttt = metrics.get("time_to_train_min")
        line = (f"{'passed' if verdict.passed else 'FAILED'} (seed {seed}): compliance "
                f"{_check(verdict.checks, 'compliance')}, "
                + (f"time to train {ttt * 60:.2f} s, " if ttt is not None else "")
                + f"{metrics.get('epochs', 0):g} epochs, eval_accuracy "
                  f"{metrics.get('eval_accuracy', 0):.4f}"
                + ("" if verdict.passed else f"; {verdict.reason}"))
    set_plan = ctx.set_of(planned)
    logs = _converged_logs(ctx, set_plan)
    manifest = ctx.manifests[set_plan.benchmark]
    rcp = rcp_status(logs, set_plan.official, manifest.ruleset, ctx.campaign.division,
                     set_plan.required)
    return Feedback(planned.label, passed(record), line,
                    standing(set_plan, ctx.store).describe(), rcp)


def _check(checks: list[Check], name: str) -> str:
    found = next((c for c in checks if c.name == name), None)
    return "passed" if found is not None and found.ok else "failed"


def _converged_logs(ctx: TrainingContext, set_plan: SetPlan) -> list[Path]:
    """The logs of the set's runs that passed (converged), for rcp_checker."""
    logs = []
    for planned in set_plan.runs:
        record = ctx.store.standing(planned.spec.key)
        if record is not None:
            logs.append(log_path(ctx.store.path(record.key, record.attempt), record.spec))
    return logs


@dataclass(frozen=True)
class PackageOutcome:
    """The package, the official checker's verdict, and both scores per system."""

    org: Path
    verdict: PackageVerdict
    ours: dict[tuple[str, str], float]  # (system, benchmark) -> subrun's olympic score
    official: dict[tuple[str, str], float]  # result_summarizer's
    missing: list[str]  # sets without a full set of logs


def package(ctx: TrainingContext, systems: dict[str, dict[str, str]]) -> PackageOutcome:
    """Assemble the package from each set's submitted runs, then run the official judges."""
    org = org_dir(ctx.campaign.paths.package, ctx.campaign.division, ctx.submitter)
    results, ours, missing = [], {}, []
    for s in ctx.sets:
        logs = submitted_logs(s, ctx.store)
        selection = standing(s, ctx.store).selection
        if len(logs) < s.required or selection is None:
            missing.append(f"{s.host}/{s.benchmark}: {len(logs)} of {s.required} logs")
            continue
        results.append(SystemResults(s.host, s.official, logs))
        ours[(s.host, s.official)] = selection.score
    impls = [Implementation(m.official_model, m.submission.implementation,
                            m.image_spec().context_dir) for m in ctx.manifests.values()]
    assemble_package(org, systems, impls, results)
    work = ctx.campaign.paths.package_checks
    verdict = check_package(org, _ruleset(ctx), work)
    official = summarize(org, _ruleset(ctx), work) if results else {}
    return PackageOutcome(org, verdict, ours, official, missing)


def _ruleset(ctx: TrainingContext) -> str:
    rulesets = {m.ruleset for m in ctx.manifests.values()}
    if len(rulesets) != 1:
        raise ConfigError(f"Campaign '{ctx.campaign.name}' mixes training rulesets "
                          f"{', '.join(sorted(rulesets))}; one package is checked under one.")
    return rulesets.pop()


def report(ctx: TrainingContext, outcome: PackageOutcome, feedbacks: list[Feedback]) -> Path:
    """report.md: every run's verdict, each system's score next to result_summarizer's, and
    the package checker's verdict."""
    lines = [f"# Training campaign '{ctx.campaign.name}'", "",
             f"{ctx.campaign.division} division, {ctx.campaign.mode.value} mode"
             + (" (not submittable)" if ctx.campaign.mode.value == "short" else "") + ".", "",
             "| run | verdict |", "|---|---|"]
    lines += [f"| {f.label} | {f.line} |" for f in feedbacks]
    lines += ["", "| system | benchmark | subrun olympic score (min) | result_summarizer (min) |",
              "|---|---|---|---|"]
    for (system, bench), score in sorted(outcome.ours.items()):
        theirs = outcome.official.get((system, bench))
        lines.append(f"| {system} | {bench} | {score:.6f} | "
                     + (f"{theirs:.6f}" if theirs is not None else "none") + " |")
    lines += ["", f"package_checker: {'PASSED' if outcome.verdict.passed else 'FAILED'} "
                  f"({outcome.org})"]
    lines += [f"- {e}" for e in outcome.verdict.errors] + [f"- missing {m}"
                                                           for m in outcome.missing]
    path = ctx.campaign.paths.report / "training.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def cancel_runs(ctx: TrainingContext) -> list[RunRecord]:
    """Stop the campaign's training runs still in flight; they are recorded cancelled (the
    next start of the campaign runs their seeds again)."""
    manifest = next(iter(ctx.manifests.values()))  # finding and stopping a run needs none
    targets = {h.host: RunTarget(ctx.host(h.host), ctx.inventory.host(h.host), manifest, "", "",
                                 ctx.campaign.name) for h in ctx.campaign.hosts}
    return cancel_running(targets, ctx.store)
