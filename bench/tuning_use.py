"""Which searches a campaign asks for, and which tuning records its runs use.

A campaign's run takes a record's chosen values for user.conf where the campaign file does not
set that key itself: the manifest's scenario defaults are only defaults, and a current record
beats them. A record is current for the exact key (host, benchmark, scenario, image digest,
LoadGen build, round); one of another image, LoadGen or round is stale, never used, and said
so. Before provisioning the host's image is not known yet: the plan then uses the newest
record of the round, and the campaign checks it against the host's image once provisioned.

`tune: auto` searches only keys without a current record; `tune: true` has this campaign tune
every key itself, once (a record it finished is kept, so a campaign started again continues).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from bench.campaign import BenchmarkPlan, Campaign
from bench.estimate import FALLBACK_QPS
from bench.manifest import Manifest
from bench.plan import targets_for
from bench.run import Scenario
from bench.settings import PerfTargets
from bench.tune_search import SERVER_LIKE, STREAMS
from bench.tuning import TuneJob, probe_seconds, search_config
from bench.tuning_record import TuningBook, TuningKey, TuningRecord

Triple = tuple[str, str, Scenario]  # host, benchmark, scenario
Digests = Mapping[tuple[str, str], str]  # (host, benchmark) -> the image digest runs use
FALLBACK_LATENCY_MS = 1.0
ORDER = [Scenario.OFFLINE, Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.SERVER,
         Scenario.INTERACTIVE]  # Offline, the streams, Server: what they find bounds its start


@dataclass(frozen=True)
class Planned:
    """One host x benchmark x scenario of a tuning: its search, or why it has none."""

    triple: Triple
    job: TuneJob | None
    why: str  # "tune", or why not: kept (current record), explicit setting


def triples(campaign: Campaign, manifests: Mapping[str, Manifest]
            ) -> Iterator[tuple[Triple, BenchmarkPlan, Manifest]]:
    """Every host x benchmark x scenario of the campaign, Offline first per benchmark."""
    for host in campaign.hosts:
        for bench in host.benchmarks:
            manifest = manifests[bench.benchmark]
            for scenario in sorted(bench.scenarios or manifest.scenarios, key=ORDER.index):
                yield (host.host, bench.benchmark, scenario), bench, manifest


def explicit(bench: BenchmarkPlan, scenario: Scenario) -> str | None:
    """The key the campaign file sets itself for what tuning would choose, if any."""
    names = {"target_latency", "target_latency_ms"} if scenario in STREAMS else {"target_qps"}
    return next((k for k in bench.settings.get(scenario, {}) if k.rsplit(".", 1)[-1] in names),
                None)


def key_of(campaign: Campaign, triple: Triple, digests: Digests, loadgen: str) -> TuningKey:
    host, benchmark, scenario = triple
    return TuningKey(host, benchmark, scenario, digests.get((host, benchmark), ""), loadgen,
                     campaign.round)


def newest_of_round(book: TuningBook, triple: Triple, round_: str) -> TuningRecord | None:
    """The newest finished record of a triple in a round: what stands in for the host's image
    before provisioning tells which record is current."""
    return next((r for r in reversed(book.history(*triple)) if r.done and r.round == round_),
                None)


def records_for(campaign: Campaign, manifests: Mapping[str, Manifest], book: TuningBook,
                digests: Digests | None = None, loadgen: str = ""
                ) -> tuple[dict[Triple, TuningRecord], list[str]]:
    """The records the campaign's runs use, and a note per triple that has any record. Without
    digests (before provisioning) the newest record of the round stands in."""
    used: dict[Triple, TuningRecord] = {}
    notes: list[str] = []
    for triple, bench, _ in triples(campaign, manifests):
        where = "/".join(map(str, triple))
        history = [r for r in book.history(*triple) if r.done]
        if not history:
            continue
        if (own := explicit(bench, triple[2])) is not None:
            notes.append(f"{where}: the campaign sets {own}; the tuned value is not used")
            continue
        if digests is None:
            found = newest_of_round(book, triple, campaign.round)
            why = "checked against the host's image when the campaign runs"
        else:
            key = key_of(campaign, triple, digests, loadgen)
            found = book.current(key)
            why = ""
        if found is not None and found.chosen:
            used[triple] = found
            notes.append(f"{where}: {_chosen(found)} from the tuning of {_when(found)} "
                         f"(image {_image(found.image_digest)})" + (f"; {why}" if why else ""))
        elif found is not None:
            notes.append(f"{where}: the tuning of {_when(found)} found no value; the "
                         "defaults are used")
        else:
            stale = history[-1]
            notes.append(f"{where}: the tuning record of {_when(stale)} is stale "
                         f"({_differs(stale, campaign, digests, loadgen, triple)}): not used; "
                         "tune again (`tune: auto`, or `subrun tune`)")
    return used, notes


def tuned_campaign(campaign: Campaign, used: Mapping[Triple, TuningRecord]) -> Campaign:
    """The campaign with each used record's chosen values under its own settings."""
    if not used:
        return campaign
    hosts = []
    for host in campaign.hosts:
        benches = []
        for bench in host.benchmarks:
            settings = dict(bench.settings)
            for (h, b, scenario), record in used.items():
                if (h, b) == (host.host, bench.benchmark):
                    chosen = {k.rsplit(".", 1)[-1]: v for k, v in record.chosen.items()}
                    settings[scenario] = {**chosen, **settings.get(scenario, {})}
            benches.append(bench.model_copy(update={"settings": settings}))
        hosts.append(host.model_copy(update={"benchmarks": benches}))
    return campaign.model_copy(update={"hosts": hosts})


def plan_tuning(campaign: Campaign, manifests: Mapping[str, Manifest], book: TuningBook,
                digests: Digests, loadgen: str, *, again: bool = False) -> list[Planned]:
    """The searches the campaign asks for (`tune:`; again: start every one over)."""
    planned = []
    for triple, bench, manifest in triples(campaign, manifests):
        if (own := explicit(bench, triple[2])) is not None:
            planned.append(Planned(triple, None, f"the campaign sets {own}"))
            continue
        key = key_of(campaign, triple, digests, loadgen)
        record = book.find(key)
        mine = record is not None and record.campaign == campaign.name
        if not again and record is not None and record.done \
                and (campaign.tune is not True or mine):
            planned.append(Planned(triple, None, "kept: a current record"))
            continue
        fresh = again or record is None or (campaign.tune is True and not mine)
        targets = targets_for(bench, manifest, triple[2])
        start = (targets.target_latency_ms or FALLBACK_LATENCY_MS) if triple[2] in STREAMS \
            else (targets.target_qps or FALLBACK_QPS)
        planned.append(Planned(triple, TuneJob(
            key=key, start=start, model=manifest.official_model, targets=targets, fresh=fresh,
            campaign=campaign.name, config=search_config(campaign, triple[2],
                                                         run_seconds(targets)),
            probe_s=probe_seconds(campaign)), "tune"))
    return planned


def run_seconds(targets: PerfTargets) -> float | None:
    """The official run's minimum duration when its settings set one (`min_duration`, ms)."""
    ms = targets.extra.get("min_duration")
    return float(ms) / 1000 if isinstance(ms, int | float) and ms > 0 else None


def with_start(job: TuneJob, book: TuningBook) -> TuneJob:
    """A Server search starts no higher than the host can do, as far as the book knows it: at
    most the Offline throughput and one query per SingleStream latency (1000 / ms) found for
    the same key (looked up when the search starts: the same tuning may have just found them;
    Offline and SingleStream are tuned first). Each probe above the host's capacity costs the
    time its queue takes to drain; one below it costs only its length. Only a search's first
    step reads its start."""
    if job.key.scenario not in SERVER_LIKE:
        return job
    offline = _found(book, job.key._replace(scenario=Scenario.OFFLINE))
    stream_ms = _found(book, job.key._replace(scenario=Scenario.SINGLE_STREAM))
    ceilings = [c for c in (offline, 1000 / stream_ms if stream_ms else None) if c]
    start = min([job.start, *ceilings])
    return job if start == job.start else replace(job, start=start)


def _found(book: TuningBook, key: TuningKey) -> float | None:
    """What the key's search found (Offline samples/s, a stream's latency in ms), else what its
    last probe measured while the search is under way."""
    record = book.find(key)
    if record is None:
        return None
    if record.found:
        return record.found
    for probe in reversed(record.probes):
        if key.scenario is Scenario.OFFLINE and probe.samples_per_s:
            return probe.samples_per_s
        if key.scenario in STREAMS and probe.latency_ns:
            return probe.latency_ns / 1e6
    return None


def _chosen(record: TuningRecord) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in record.chosen.items())


def _when(record: TuningRecord) -> str:
    return f"{record.done_at:%Y-%m-%d %H:%M}" if record.done_at else "a search under way"


def _image(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12] or "unknown"


def _differs(record: TuningRecord, campaign: Campaign, digests: Digests | None, loadgen: str,
             triple: Triple) -> str:
    found = []
    if record.round != campaign.round:
        found.append(f"round {record.round}, the campaign's is {campaign.round}")
    image = (digests or {}).get(triple[:2])
    if image is not None and record.image_digest != image:
        found.append(f"image {_image(record.image_digest)}, the host has {_image(image)}")
    if loadgen and record.loadgen_version != loadgen:
        found.append(f"LoadGen {record.loadgen_version}, the campaign's is {loadgen}")
    return "; ".join(found) or "another image, LoadGen build or round"

