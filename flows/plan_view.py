"""The plan as people read it: a table per host with estimates, and the campaign's ETA."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol

from bench.measured import Basis
from bench.plan import Plan
from bench.run import RunKind
from bench.tuning_estimate import PlannedSearch, tuning_seconds
from lab.config import Inventory


class Holding(Protocol):
    """Another campaign's flow run holding a host now (flows.holders.Holder)."""

    @property
    def flow_run_name(self) -> str: ...

    @property
    def campaign(self) -> str: ...

    def left_s(self) -> float: ...


def duration(seconds: float) -> str:
    """1 h 02 min, 3 min 20 s, 12 s."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def analyzer_notes(plan: Plan, inventory: Inventory) -> list[str]:
    """Which analyzer measures each host's power runs, and which hosts take turns on one."""
    hosts: dict[str, list[str]] = {}
    for host in plan.hosts():
        if any(r.spec.kind is RunKind.POWER for r in plan.for_host(host)):
            hosts.setdefault(inventory.analyzer_for(host).name, []).append(host)
    notes = []
    for analyzer, names in sorted(hosts.items()):
        if len(names) > 1:
            notes.append(f"hosts {', '.join(names)} share analyzer '{analyzer}': their power runs "
                         "take turns, and a power run may wait for another host's")
        else:
            notes.append(f"host {names[0]}'s power is read from analyzer '{analyzer}'")
    return notes


def basis_summary(plan: Plan) -> str:
    """How many estimates rest on what: a `default` one is a guess (no tuning record, no run of
    that host in the store), and whether the image digests were known."""
    counts = Counter(r.basis.value for r in plan.runs)
    parts = ", ".join(f"{counts[b.value]} {b.value}" for b in Basis if counts[b.value])
    line = f"Estimates: {parts}."
    defaults = plan.defaults()
    if defaults:
        line += (f" {len(defaults)} of {len(plan.runs)} rest on defaults (the targets taken at "
                 "their word, nothing measured on the host yet): guesses.")
    if plan.runs and not any(r.spec.image_digest for r in plan.runs):
        line += (" Image digests are unknown until the images are provisioned: the campaign "
                 "estimates again with them before its first run.")
    return line


def wall_time_s(plan: Plan, waits_s: Mapping[str, float] | None = None,
                tuning_s: Mapping[str, float] | None = None) -> float:
    """The busiest host's estimate, each host's with the wait for another campaign holding it
    and its tuning step before its runs."""
    waits, tuning = waits_s or {}, tuning_s or {}
    return max((plan.host_estimate_s(h) + waits.get(h, 0.0) + tuning.get(h, 0.0)
                for h in plan.hosts()), default=0.0)


def tuning_summary(searches: Sequence[PlannedSearch]) -> str:
    """What the tuning step adds, and why the run estimates will change."""
    if not searches:
        return ""
    longest = max(tuning_seconds(searches).values())
    return (f"Tuning: {_count(len(searches), 'search', 'searches')} before the runs, about "
            f"{duration(longest)} on the busiest host "
            f"({_count(sum(s.probes for s in searches), 'probe')} at a typical count), counted "
            "in the wall time. The run estimates rest on the targets before tuning: they are "
            "revised after tuning, with the values it finds.")


def probes(search: PlannedSearch) -> str:
    """A search's typical probe count, for its row."""
    return _count(search.probes, "probe")


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def wait_notes(holders: Mapping[str, Holding]) -> list[str]:
    """One line per host another campaign holds now: its left-over work is counted."""
    return [f"host {host} is held by flow run '{h.flow_run_name}' of campaign '{h.campaign}', "
            f"which has about {duration(h.left_s())} of runs left on it: counted in the "
            "wall time" for host, h in sorted(holders.items())]


def plan_markdown(plan: Plan, notes: list[str] | None = None,
                  waits_s: Mapping[str, float] | None = None,
                  searches: Sequence[PlannedSearch] = ()) -> str:
    """The plan as Markdown: per-host tables (the tuning step's searches first), totals, and
    the wall-time estimate (with the waits for other campaigns on shared hosts, when known)."""
    c = plan.campaign
    tuning = tuning_seconds(searches)
    lines = [f"# Campaign {c.name}: {len(plan.runs)} runs, about "
             f"{duration(wall_time_s(plan, waits_s, tuning))}",
             "", f"Round {c.round}, {c.division} division, {c.mode.value} mode"
             + (" (not submittable)" if c.mode.value == "short" else "") + ".", ""]
    for host in plan.hosts():
        total = plan.host_estimate_s(host) + tuning.get(host, 0.0)
        lines += [f"## {host}: {duration(total)}", "",
                  "| benchmark | scenario | run | estimate | basis |", "|---|---|---|---|---|"]
        lines += [f"| {s.benchmark} | {s.scenario.value} | tuning | {duration(s.seconds)} | "
                  f"{probes(s)} |" for s in searches if s.host == host]
        lines += [f"| {r.spec.benchmark} | {r.spec.scenario.value} | {r.spec.kind.value} | "
                  f"{duration(r.estimate_s)} | {r.basis.value} |" for r in plan.for_host(host)]
        lines.append("")
    lines += [basis_summary(plan), ""]
    if searches:
        lines += [tuning_summary(searches), ""]
    found = sorted({r.assumption for r in plan.runs if r.assumption}) + (notes or [])
    lines += [f"- {note}" for note in found]
    return "\n".join(lines) + "\n"
