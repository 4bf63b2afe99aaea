"""The report's "Estimate vs actual": what the plan said each run would take, and what it took.

The plan's estimates are kept as the campaign's `plan.json` (bench.plan_record); the actual
times come from the run store. The basis column says what each estimate rested on (`default`:
nothing measured on the host, a guess), so a large difference on a guessed run is no surprise,
and one on a tuned or measured run is worth a look.
"""

from __future__ import annotations

from bench.plan_record import Comparison
from submission import plots


def section(found: Comparison | None) -> list[str]:
    """Per run and per host: estimate, actual wall time, difference, basis."""
    if found is None:
        return []
    out = ["## Estimate vs actual", "",
           "Per run: the plan's estimate and the wall time of all its attempts (settle wait "
           "included); the difference is the estimate's error against the actual.", "",
           "| run | estimate | actual | attempts | difference | basis |",
           "|---|---|---|---|---|---|"]
    for run in found.runs:
        actual = "not run" if run.actual_s is None else _s(run.actual_s)
        if run.reused:
            actual += " (earlier start)"
        basis = run.planned.basis.value
        out.append(f"| {run.planned.label} | {_s(run.planned.estimate_s)} | {actual} | "
                   f"{run.attempts} | {_pct(run.diff_pct)} | "
                   f"{'**default**' if basis == 'default' else basis} |")
    out += ["", "Per host: the sum of the estimates of the runs made under this plan against "
                "the wall time from the first one's settle to the last one's end.", "",
            "| host | estimated | actual | difference | runs | found finished |",
            "|---|---|---|---|---|---|"]
    for host in found.hosts:
        actual = "—" if host.actual_s is None else _s(host.actual_s)
        out.append(f"| {host.host} | {_s(host.estimate_s)} | {actual} | "
                   f"{_pct(host.diff_pct)} | {host.runs} | {host.reused} |")
    defaults = sum(r.planned.basis.value == "default" for r in found.runs)
    out += ["", f"{defaults} of {len(found.runs)} estimates rested on defaults.", ""]
    return out


def figures(found: Comparison | None) -> dict[str, bytes]:
    """`estimates.png`: estimated and actual wall time per host."""
    if found is None:
        return {}
    hosts = {h.host: (h.estimate_s, h.actual_s) for h in found.hosts if h.actual_s is not None}
    png = plots.estimate_bars(hosts, "Estimated vs actual wall time per host")
    return {"estimates.png": png} if png else {}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.0f} %"


def _s(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
