"""Everything a campaign run shares: the campaign, its inventory, rules, manifests, plan, store,
and one connection per host (each host runs one run at a time, so one connection serves it)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from bench.campaign import Campaign, load_campaign
from bench.evidence import Evidence, gather
from bench.manifest import Manifest, load_manifest
from bench.plan import Plan, make_plan
from bench.rules import RoundRules, load_rules
from bench.store import RunStore
from bench.tuning_record import TuningBook
from bench.tuning_use import Digests, records_for, tuned_campaign
from lab.config import Inventory, load_inventory
from lab.errors import ConfigError
from lab.host import Host
from lab.transport import open_host

DEFAULT_CAMPAIGN = Path(__file__).resolve().parent.parent / "campaigns" / "demo.yaml"


class HostConnections:
    """One open connection per host of an inventory, opened on first use, shared by threads."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._hosts: dict[str, Host] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Host:
        with self._lock:
            if name not in self._hosts:
                self._hosts[name] = open_host(self.inventory.host(name))
            return self._hosts[name]

    def close(self) -> None:
        with self._lock:
            for host in self._hosts.values():
                host.close()
            self._hosts.clear()


@dataclass
class CampaignContext:
    """The loaded, validated inputs of one campaign run."""

    campaign: Campaign
    inventory: Inventory
    rules: RoundRules
    manifests: dict[str, Manifest]
    plan: Plan
    store: RunStore
    evidence: Evidence = field(default_factory=Evidence)  # what the plan's estimates rest on
    # set when the campaign's flow run is cancelled: runs stop, nothing new starts
    cancelled: threading.Event = field(default_factory=threading.Event)
    connections: HostConnections = field(init=False)

    def __post_init__(self) -> None:
        self.connections = HostConnections(self.inventory)

    @property
    def submitter(self) -> str:
        """The campaign's submitter, else the inventory's system_defaults.submitter."""
        found = self.campaign.submitter or self.inventory.system_defaults.get("submitter")
        if not found:
            raise ConfigError("No submitter: set `submitter:` in the campaign file or "
                              "`system_defaults.submitter` in hosts.yaml.")
        return str(found)

    @property
    def book(self) -> TuningBook:
        """What tuning learned, shared by the campaigns under the same output folder."""
        return TuningBook(self.campaign.paths.tuning)

    def host(self, name: str) -> Host:
        """The open connection to a host of the inventory (opened on first use)."""
        return self.connections.get(name)

    def close(self) -> None:
        self.connections.close()


def resolve_campaign(campaign_file: str | Path | None, campaign: Campaign | None) -> Campaign:
    """The campaign given as a model, else loaded from a file, else the demo campaign."""
    if campaign is not None:
        return campaign
    return load_campaign(Path(campaign_file) if campaign_file else DEFAULT_CAMPAIGN)


def load_context(campaign: Campaign) -> CampaignContext:
    """Load everything the campaign names and plan it; ConfigError for anything wrong."""
    inventory = load_inventory(campaign.inventory)
    for host_plan in campaign.hosts:
        inventory.host(host_plan.host)  # an unknown host name fails here, with a suggestion
        if campaign.power:
            _require_analyzer(inventory, campaign, host_plan.host)
    rules = load_rules(campaign.round)
    names = {b.benchmark for h in campaign.hosts for b in h.benchmarks}
    manifests = {name: load_manifest(name) for name in sorted(names)}
    store = RunStore(campaign.paths.store)
    evidence = evidence_for(campaign, inventory)
    plan, _ = plan_for(campaign, manifests, rules, evidence)
    return CampaignContext(campaign, inventory, rules, manifests, plan, store, evidence)


def evidence_for(campaign: Campaign, inventory: Inventory) -> Evidence:
    """What the estimates rest on: every store and tuning record under the campaign's output
    folder, and each host's settle time."""
    paths = campaign.paths
    return gather(paths.output_dir, paths.store, {h.name: h.settle_s for h in inventory.hosts},
                  paths.tuning)


def plan_for(campaign: Campaign, manifests: dict[str, Manifest], rules: RoundRules,
             evidence: Evidence, digests: Digests | None = None, loadgen: str = ""
             ) -> tuple[Plan, list[str]]:
    """The campaign's plan with the tuning records its runs use (bench.tuning_use; with the
    hosts' image digests once provisioned, else the newest record of the round), and a note
    per record used or left out."""
    used, notes = records_for(campaign, manifests, TuningBook(campaign.paths.tuning), digests,
                              loadgen)
    plan = make_plan(tuned_campaign(campaign, used), manifests, rules, evidence)
    return plan, notes


def _require_analyzer(inventory: Inventory, campaign: Campaign, host: str) -> None:
    """Refuse at plan time a power campaign on a host no analyzer measures."""
    try:
        inventory.analyzer_for(host)
    except ConfigError as e:
        raise ConfigError(f"{campaign.inventory or 'hosts.yaml'}: campaign '{campaign.name}' "
                          f"asks for power runs on host '{host}'. {e}") from None
