"""The steps of a campaign, free of Prefect: each is one call into the layers below.

The flow in `flows/submission.py` wraps each in a task; tests can call them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from bench.assets import verify_assets
from bench.cancel import cancel_running
from bench.execute import ExecuteOptions, execute
from bench.loadgen_build import require_loadgen_round
from bench.native import provision as provision_native
from bench.plan import PlannedRun
from bench.plan_record import Comparison, compare, read_plan
from bench.run import Mode, RunKind, RunRecord, RunState
from bench.settle import TargetSet, settle
from bench.target import RunTarget
from bench.tuning_record import TuningKey, TuningRecord
from collectors.describe import describe_host
from collectors.preflight import preflight as system_preflight
from collectors.system_json import SystemDescription, write
from flows.context import CampaignContext
from flows.outcome import RunOutcome
from lab.config import Inventory
from lab.cores import run_cores, setting_of
from lab.cuts import through_cuts
from lab.docker import Engine
from lab.errors import ConfigError, ConnectError, NotCompared
from lab.host import Host
from lab.lease import HOST_LEASE
from lab.probe import probe_all
from lab.provision import ProvisionResult, provision
from lab.transport import open_host
from power.lock import lock_holder
from power.official_run import OfficialSetup, execute_official
from power.readiness import check_official, client_checkout
from power.track import execute_track
from submission.assemble import assemble
from submission.checker import CheckerOutcome, run_checker
from submission.index import TreeIndex
from submission.precheck import PrecheckReport, precheck
from submission.report import ReportFiles, ReportInput, write_report
from submission.sources import (
    benchmark_input,
    stored_runs,
    system_input,
    tree_request,
)
from submission.tarball import Tarball, pack


def check_ready(ctx: CampaignContext) -> str:
    """Refuse early: a LoadGen of another round, unreachable hosts, a missing analyzer."""
    build = require_loadgen_round(ctx.campaign.round)
    reports = probe_all([ctx.inventory.host(h) for h in ctx.plan.hosts()])
    down = [r for r in reports if not r.reachable]
    if down:
        raise ConnectError("Cannot start the campaign: " + " ".join(r.problems[0] for r in down))
    for name in ctx.plan.hosts():  # a pinned core the host lacks is refused before any run
        config = ctx.inventory.host(name)
        if setting_of(config)[0] is not None:
            through_cuts(lambda: run_cores(ctx.host(name), config,  # noqa: B023 - called now
                                           source=ctx.campaign.inventory))
    if ctx.campaign.power and not ctx.inventory.analyzers:
        raise ConfigError(f"{ctx.campaign.inventory}: the campaign asks for power runs but "
                          "`analyzers:` is empty; add one (resource: sim for the simulator).")
    check_power(ctx)
    return build.version


def check_power(ctx: CampaignContext) -> str | None:
    """Refuse official power without a usable director (the key to set); a note when ready."""
    if ctx.campaign.power_path != "official":
        return None
    power_hosts = sorted({r.spec.host for r in ctx.plan.runs if r.spec.kind is RunKind.POWER})
    by_analyzer: dict[str, list[str]] = {}
    for host in power_hosts:
        by_analyzer.setdefault(_analyzer(ctx, host), []).append(host)
    notes = [check_official(ctx.inventory, ctx.campaign.inventory, analyzer, hosts,
                            _checkout(ctx), host_of=ctx.host)
             for analyzer, hosts in by_analyzer.items()]
    return "; ".join(notes) or None


def controller_engine(inventory: Inventory, inventory_file: Path) -> Engine:
    """The engine images are built on before being shipped to hosts marked `provision: ship`
    (inference and training campaigns alike)."""
    local = next((h for h in inventory.hosts if h.transport == "local"), None)
    if local is None:
        raise ConfigError(f"{inventory_file}: shipping images needs a host with "
                          "`transport: local` (the controller) and its Docker engine.")
    return Engine(open_host(local), local.docker)


def provision_host(ctx: CampaignContext, host: str) -> dict[str, ProvisionResult]:
    """Make every benchmark image the host needs present on it (unchanged ones cost nothing);
    a host without Docker gets each benchmark's native environment instead."""
    return through_cuts(lambda: _provision_host(ctx, host))


def _provision_host(ctx: CampaignContext, host: str) -> dict[str, ProvisionResult]:
    config = ctx.inventory.host(host)
    benchmarks = next(h.benchmarks for h in ctx.campaign.hosts if h.host == host)
    if not config.docker.engine:
        return {b.benchmark: provision_native(ctx.host(host), config,
                                              ctx.manifests[b.benchmark]) for b in benchmarks}
    engine = Engine(ctx.host(host), config.docker)
    controller = controller_engine(ctx.inventory, ctx.campaign.inventory) \
        if config.docker.provision == "ship" else None
    images = {}
    for b in benchmarks:
        manifest = ctx.manifests[b.benchmark]
        images[b.benchmark] = provision(engine, manifest.image_spec(), controller=controller)
        # datasets and models against their published checksums, before any run relies on them
        verify_assets(engine.host, config.docker, manifest, images[b.benchmark].image)
    return images


def bind_images(ctx: CampaignContext, images: Mapping[str, Mapping[str, ProvisionResult]],
                loadgen_version: str) -> None:
    """Fix every run's image digest and LoadGen build. The run keys and estimates become final
    once the tuning records of exactly these images are applied (`tuning_steps.apply_tuning`),
    which keeps the plan for the report."""
    digests = {(host, bench): result.image_id
               for host, per_host in images.items() for bench, result in per_host.items()}
    ctx.plan = ctx.plan.with_images(digests, loadgen_version)


def describe(ctx: CampaignContext, host: str,
             images: Mapping[str, ProvisionResult]) -> SystemDescription:
    """The host's system description, with the software stack read from its images."""
    campaign = {"division": ctx.campaign.division, "submitter": ctx.submitter}
    description = through_cuts(lambda: describe_host(
        ctx.host(host), ctx.inventory, host, images=[r.image for r in images.values()],
        campaign=campaign))
    write(description, ctx.campaign.paths.systems, system_id=host)
    return description


def check_systems(ctx: CampaignContext, descriptions: list[SystemDescription]) -> list[str]:
    """Every empty or placeholder system field; a submission campaign stops here until clean."""
    problems = system_preflight(descriptions, ctx.campaign.mode, ctx.campaign.inventory)
    return [str(p) for p in problems or []]


def run(ctx: CampaignContext, planned: PlannedRun,
        images: Mapping[str, ProvisionResult]) -> RunRecord:
    """Execute one planned run on its host (a power run under the analyzer's lock)."""
    spec = planned.spec
    ctx.host(spec.host).ensure_reachable()  # a host given up: its runs are not run
    image = images[spec.benchmark]
    target = RunTarget(ctx.host(spec.host), ctx.inventory.host(spec.host),
                       ctx.manifests[spec.benchmark], image.image, image.image_id,
                       ctx.campaign.name, cancelled=ctx.cancelled)
    options = ExecuteOptions(max_reruns=ctx.campaign.max_reruns)
    # a power run's set-up and wind-down (daemon, director, ranges) are done again after a
    # cut: a run already judged is returned as it is, one in flight is reattached
    if spec.kind is RunKind.POWER and ctx.campaign.power_path == "official":
        checkout = _checkout(ctx)
        assert checkout is not None  # check_ready refused the campaign otherwise
        return through_cuts(lambda: execute_official(
            target, planned, ctx.store, ctx.rules, ctx.inventory, _analyzer(ctx, spec.host),
            OfficialSetup(checkout), options))
    if spec.kind is RunKind.POWER:
        return through_cuts(lambda: execute_track(
            target, planned, ctx.store, ctx.rules, ctx.inventory, _analyzer(ctx, spec.host),
            options=options, settle_s=2.0 if ctx.campaign.mode is Mode.SHORT else 10.0))
    references = _references(ctx, planned)
    _unless_compared(ctx, planned, references)
    record = execute(target, planned, ctx.store, ctx.rules, references=references,
                     options=options)
    if not spec.kind.is_compliance:
        return record
    same = [p for p in ctx.plan.for_host(spec.host)
            if (p.spec.benchmark, p.spec.scenario) == (spec.benchmark, spec.scenario)]
    runner = TargetSet(target, same, ctx.store, ctx.rules, options)
    settle(ctx.store, runner.runs(), runner, ctx.campaign.max_reruns)
    return ctx.store.latest(record.key) or record


def _unless_compared(ctx: CampaignContext, planned: PlannedRun,
                     references: Mapping[RunKind, RunRecord]) -> None:
    """A compliance test runs at the load of the attempt it is compared with; when that run
    (or, for TEST01, the accuracy run) never passed, there is no such load and no comparison:
    the test is not run, rather than run at the plan's target and failed for it."""
    spec = planned.spec
    if not spec.kind.is_compliance or ctx.store.latest(spec.key) is not None:
        return
    needed = [RunKind.PERFORMANCE] + ([RunKind.ACCURACY] if spec.kind is RunKind.TEST01 else [])
    compared = {p.spec.kind for p in ctx.plan.for_host(spec.host) if p.label in planned.after}
    missing = [k for k in needed if k in compared and k not in references]
    if missing:
        what = " and ".join(f"{k.value} run" for k in missing)
        where = f"{spec.host}/{spec.benchmark}/{spec.scenario.value}"
        raise NotCompared(f"it is compared with the {what} of {where}, which did not pass. "
                          "Make it pass (see its verdict in the report), then start the "
                          "campaign again: the test runs at its load.")


def _analyzer(ctx: CampaignContext, host: str) -> str:
    """The analyzer on the host's feed (hosts.yaml `power: {analyzer: NAME}`)."""
    return ctx.inventory.analyzer_for(host).name


def _checkout(ctx: CampaignContext) -> Path | None:
    return client_checkout(ctx.inventory, ctx.campaign.power_dev)


def run_analyzer(ctx: CampaignContext, planned: PlannedRun) -> str | None:
    """The analyzer a run measures with: its host's, for a power run; else None."""
    if planned.spec.kind is not RunKind.POWER:
        return None
    return ctx.inventory.analyzer_for(planned.spec.host).name


class Reaching(Protocol):
    """A campaign's context as far as leases go: its inventory and its open hosts."""

    inventory: Inventory

    def host(self, name: str) -> Host: ...


def host_leases(ctx: Reaching, host: str, power: bool = False) -> list[tuple[Host, str]]:
    """The leases a run takes on its targets (`lab.lease`): its host, and for a power run
    its analyzer, on the host the analyzer's daemon runs on."""
    leases = [(ctx.host(host), HOST_LEASE)]
    if power:
        analyzer = ctx.inventory.analyzer_for(host)
        leases.append((ctx.host(analyzer.host), f"analyzer-{analyzer.name}"))
    return leases


def analyzer_busy(ctx: CampaignContext, planned: PlannedRun) -> str | None:
    """For a power run whose analyzer another run holds now: which analyzer and who holds it."""
    analyzer = run_analyzer(ctx, planned)
    if analyzer is None:
        return None
    holder = lock_holder(analyzer)
    if holder is None:
        return None
    return f"analyzer '{analyzer}' is in use by run {holder.get('holder', '?')}"


def cancel_runs(ctx: CampaignContext) -> list[RunRecord]:
    """Stop the campaign's runs still in flight on its hosts; they are recorded cancelled."""
    manifest = next(iter(ctx.manifests.values()))  # finding and stopping a run needs none
    targets = {h: RunTarget(ctx.host(h), ctx.inventory.host(h), manifest, "", "",
                            ctx.campaign.name) for h in ctx.plan.hosts()}
    return cancel_running(targets, ctx.store)


def _references(ctx: CampaignContext, planned: PlannedRun) -> dict[RunKind, RunRecord]:
    """The attempts a compliance test is compared with (bench.submitted.reference)."""
    found = {}
    for other in ctx.plan.for_host(planned.spec.host):
        if other.label in planned.after:
            record = ctx.store.reference(other.spec.key)
            if record is not None:
                found[other.spec.kind] = record
    return found


def left_running(ctx: CampaignContext, runs: list[PlannedRun]) -> list[PlannedRun]:
    """The runs whose latest attempt the store still holds as running once every task has
    ended: a task that failed while its container or process went on (or a compliance set's
    re-run cut inside another run's task). They are reattached and collected before the
    campaign ends, so none ends without its verdict."""
    return [p for p in runs
            if (r := ctx.store.latest(p.spec.key)) is not None and r.state == RunState.RUNNING]


def still_on_host(ctx: CampaignContext, label: str) -> str:
    """For a run not run because its host was given up: a sentence naming its attempt still
    running there (the next start of the campaign reattaches and collects it), else ""."""
    planned = next((p for p in ctx.plan.runs if p.label == label), None)
    record = ctx.store.latest(planned.spec.key) if planned else None
    if record is None or record.state != RunState.RUNNING:
        return ""
    return (f" Its attempt {record.attempt} was left running on host '{record.spec.host}'; "
            "the next start of the campaign collects and judges it.")


def final_outcome(ctx: CampaignContext, planned: PlannedRun) -> RunOutcome | None:
    """A run's outcome once the campaign's runs have ended: settling a compliance set may have
    measured a performance run again or re-verified a test after its own task returned."""
    record = ctx.store.standing(planned.spec.key) or ctx.store.latest(planned.spec.key)
    return RunOutcome.of(record) if record is not None else None


def assemble_tree(ctx: CampaignContext, descriptions: Mapping[str, SystemDescription]
                  ) -> TreeIndex:
    """The submission tree from the latest passing attempt of every run."""
    systems = {h: system_input(h, d.system) for h, d in descriptions.items()}
    benchmarks = {n: benchmark_input(m) for n, m in ctx.manifests.items()}
    request = tree_request(ctx.campaign, ctx.rules, ctx.submitter)
    return assemble(request, stored_runs(ctx.store), systems, benchmarks)


def check_tree(ctx: CampaignContext, index: TreeIndex) -> PrecheckReport:
    return precheck(ctx.campaign.paths.tree, ctx.rules, index)


def official_check(ctx: CampaignContext) -> CheckerOutcome | None:
    """The official checker's verdict on the tree, when the campaign names a checkout."""
    if ctx.campaign.inference_repo is None:
        return None
    paths = ctx.campaign.paths
    return run_checker(paths.tree, ctx.campaign.inference_repo, ctx.rules.checker_version,
                       work_dir=paths.checker)


def package(ctx: CampaignContext) -> Tarball | None:
    paths = ctx.campaign.paths
    return pack(paths.tree, paths.tarball) \
        if paths.tree.is_dir() else None  # no result made it into a tree


def used_tunings(ctx: CampaignContext) -> list[TuningRecord]:
    """The current tuning records of the campaign's planned runs (their images bound)."""
    keys = dict.fromkeys(TuningKey(r.spec.host, r.spec.benchmark, r.spec.scenario,
                                   r.spec.image_digest, r.spec.loadgen_version, r.spec.round)
                         for r in ctx.plan.runs)
    return [found for key in keys if (found := ctx.book.current(key)) is not None]


def report(ctx: CampaignContext, index: TreeIndex, checks: PrecheckReport,
           checker: CheckerOutcome | None, tarball: Tarball | None,
           compared: Comparison | None = None) -> ReportFiles:
    """report.md and report.html for the campaign (estimate vs actual: `compared`, else read
    from the kept plan)."""
    data = ReportInput(title=f"subrun campaign '{ctx.campaign.name}'",
                       mode=ctx.campaign.mode.value, index=index,
                       runs=stored_runs(ctx.store), precheck=checks, checker=checker,
                       tarball=tarball, estimates=compared or estimates(ctx),
                       tunings=used_tunings(ctx))
    return write_report(data, ctx.campaign.paths.report)


def estimates(ctx: CampaignContext) -> Comparison | None:
    """The kept plan's estimates against the store's attempts (None before any plan was kept)."""
    kept = read_plan(ctx.campaign.paths.plan)
    return compare(kept, ctx.store) if kept is not None else None
