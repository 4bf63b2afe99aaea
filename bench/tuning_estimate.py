"""How long a campaign's tuning step lasts, told before it runs (`subrun plan`, the plan artifact).

A search's probe count is known only once it ends: Offline and the streams take one probe (and
Offline a sizing probe before it), a Server search as many as its bracket needs, then its
confirmation. The plan counts a typical number per scenario, each probe its minimum duration
plus a run's overhead and the host's settle wait, hosts tuning in parallel before their runs.

Before provisioning the host's image is not known: as for the records the runs take
(bench.tuning_use), the newest finished record of the round stands in, and a triple with one is
not counted. The campaign decides again on the image it provisioned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.campaign import Campaign
from bench.estimate import RUN_OVERHEAD_S
from bench.manifest import Manifest
from bench.run import Scenario
from bench.tune_search import SERVER_LIKE
from bench.tuning import TuneJob
from bench.tuning_record import TuningBook
from bench.tuning_use import Triple, newest_of_round, plan_tuning

# a search's probes at its probe length, besides the sizing and confirming ones: a Server search
# grows or shrinks to a bracket in two or three, bisects it to a few % in four, and probes a
# target or two again in a slow minute
TYPICAL_PROBES = {Scenario.OFFLINE: 1, Scenario.SINGLE_STREAM: 1, Scenario.MULTI_STREAM: 1,
                  Scenario.SERVER: 8, Scenario.INTERACTIVE: 8}
# LoadGen's part of an Offline sizing probe: its second, at a default up to a few times the
# host's rate (LoadGen issues 1.1 x target_qps x min_duration samples)
SIZING_GUESS_S = 4.0


@dataclass(frozen=True)
class PlannedSearch:
    """One search the tuning step will run, with its typical probe count and wall time."""

    host: str
    benchmark: str
    scenario: Scenario
    probes: int
    seconds: float

    @property
    def label(self) -> str:
        return f"{self.host}/{self.benchmark}/{self.scenario.value}"


def planned_searches(campaign: Campaign, manifests: Mapping[str, Manifest], book: TuningBook,
                     settle_s: Mapping[str, float] | None = None) -> list[PlannedSearch]:
    """The searches the campaign's `tune:` asks for, as far as the book tells before
    provisioning, in the order each host runs them."""
    if not campaign.tune:
        return []
    searches = []
    for item in plan_tuning(campaign, manifests, book, {}, ""):
        if item.job is None or _stand_in(campaign, book, item.triple):
            continue
        host, benchmark, scenario = item.triple
        probes, seconds = search_seconds(item.job, (settle_s or {}).get(host, 0.0))
        searches.append(PlannedSearch(host, benchmark, scenario, probes, seconds))
    return searches


def search_seconds(job: TuneJob, settle_s: float = 0.0) -> tuple[int, float]:
    """A search's typical probe count (sizing and confirmation included) and wall time."""
    scenario = job.key.scenario
    each_s = RUN_OVERHEAD_S + settle_s
    probes = TYPICAL_PROBES[scenario]
    seconds = probes * (job.probe_s + each_s)
    if scenario is Scenario.OFFLINE:
        probes, seconds = probes + 1, seconds + SIZING_GUESS_S + each_s
    if scenario in SERVER_LIKE and job.config.confirm:
        probes += 1
        seconds += (job.config.confirm_s or job.probe_s) + each_s
    return probes, seconds


def tuning_seconds(searches: Sequence[PlannedSearch]) -> dict[str, float]:
    """Each host's tuning time: its searches one after the other (hosts tune in parallel)."""
    hosts: dict[str, float] = {}
    for search in searches:
        hosts[search.host] = hosts.get(search.host, 0.0) + search.seconds
    return hosts


def _stand_in(campaign: Campaign, book: TuningBook, triple: Triple) -> bool:
    """A finished record of the round the campaign would keep (`auto`: any; `true`: its own)."""
    record = newest_of_round(book, triple, campaign.round)
    return record is not None and (campaign.tune is not True or record.campaign == campaign.name)
