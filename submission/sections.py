"""The Markdown sections of the campaign report, each a list of lines."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from bench.run import RunKind
from bench.submitted import LATENCY_SCENARIOS
from submission.checker import CheckerOutcome
from submission.facts import ResultFacts, RunCell, matrix
from submission.index import TreeIndex
from submission.inputs import StoredRun, latest_attempts
from submission.precheck import PrecheckReport
from submission.tarball import Tarball

Matrix = dict[tuple[str, str, str], dict[RunKind, RunCell]]


def outcome(precheck: PrecheckReport | None, checker: CheckerOutcome | None,
            tarball: Tarball | None, index: TreeIndex) -> list[str]:
    """Results placed and left out, prechecks, the official checker, the tarball."""
    out = ["## Outcome", "",
           f"- Results in the tree: **{len(index.results)}**; left out: **{len(index.skipped)}**"]
    out.append(f"- Prechecks: {precheck.summary()}" if precheck else "- Prechecks: not run")
    if checker is None:
        out.append("- Official checker: not run (no mlcommons/inference checkout configured)")
    elif checker.crashed:
        out.append("- Official checker: **crashed** (see the traceback under Failures)")
    else:
        counts = ", ".join(f"{k}={v}" for k, v in checker.counts.items())
        out.append(f"- Official checker: **{'OK' if checker.ok else 'errors'}**: "
                   f"`{checker.summary}` ({counts})")
    if tarball:
        out.append(f"- Tarball: `{tarball.path}` ({tarball.bytes / 1e6:.1f} MB, "
                   f"{tarball.files} files), sha256 `{tarball.sha256}`")
    return [*out, ""]


def run_matrix(table: Matrix) -> list[str]:
    """One row per host x benchmark x scenario, one column per run kind, latest verdict."""
    kinds = [k for k in RunKind if any(k in row for row in table.values())]
    if not table:
        return ["## Runs", "", "No runs in the store.", ""]
    out = ["## Runs", "", "| host | benchmark | scenario | " + " | ".join(k.value for k in kinds)
           + " |", "|---|---|---|" + "---|" * len(kinds)]
    for (host, bench, scenario), row in table.items():
        cells = [_cell(row.get(k)) for k in kinds]
        out.append(f"| {host} | {bench} | {scenario} | " + " | ".join(cells) + " |")
    return [*out, "", "Cells show the attempt that stands (the best passing performance "
                      "measurement, the latest passing attempt of other runs, else the latest); "
                      "(n) is the number of attempts.", ""]


def _cell(cell: RunCell | None) -> str:
    if cell is None:
        return "—"
    record = cell.run.record
    tries = f" ({cell.attempts})" if cell.attempts > 1 else ""
    if cell.run.passed:
        return f"pass{tries}"
    why = (record.verdict.reason if record.verdict else record.error) or record.state
    return f"**FAIL**{tries}: {_short(why)}"


def audits(runs: Sequence[StoredRun]) -> list[str]:
    """How the compliance tests were run and judged: each test's load against the performance
    attempt it is compared with (Server audits derated below it), tests verified again against
    a new performance measurement, and performance measurements withdrawn as lucky."""
    latest = latest_attempts(runs, passing_only=False)
    attempts = {(r.record.key, r.record.attempt): r for r in runs}
    perf_keys = {(r.spec.host, r.spec.benchmark, r.spec.scenario): r.record.key for r in runs
                 if r.spec.kind is RunKind.PERFORMANCE}
    lines = []
    for run in runs:
        if run.record.withdrawn:
            spec = run.spec
            lines.append(f"| {spec.host}/{spec.benchmark}/{spec.scenario.value} performance | "
                         f"attempt {run.record.attempt} withdrawn: {run.record.withdrawn} |")
    for run in latest:
        spec, record = run.spec, run.record
        if not spec.kind.is_compliance:
            continue
        where = f"{spec.host}/{spec.benchmark}/{spec.scenario.value} {spec.kind.value}"
        against = record.references.get(RunKind.PERFORMANCE.value)
        reference = attempts.get((perf_keys.get((spec.host, spec.benchmark, spec.scenario), ""),
                                  against or 0))
        if reference is not None:
            lines.append(f"| {where} | attempt {record.attempt} at {_load(run, reference)} of "
                         f"performance attempt {against} |")
        if record.reverifies is not None:
            lines.append(f"| {where} | attempt {record.attempt}: the logs of attempt "
                         f"{record.reverifies} verified again against performance attempt "
                         f"{against} |")
    if not lines:
        return []
    return ["## Compliance audits", "", "| test | how it was run and judged |", "|---|---|",
            *lines, ""]


def _load(test: StoredRun, reference: StoredRun) -> str:
    """A test's load against its reference's: "target_qps 960 (0.96 x 1000)"."""
    scenario = test.spec.scenario
    name = "target_latency" if scenario in LATENCY_SCENARIOS else "target_qps"
    key = f"*.{scenario.loadgen}.{name}"
    ours, theirs = test.spec.settings.get(key), reference.spec.settings.get(key)
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float):
        return "LoadGen's default load (the same)" if ours == theirs else \
            f"{name} {ours} against {theirs}"
    if ours == theirs:
        return f"{name} {ours:g} (the same)"
    return f"{name} {ours:g} ({ours / theirs:.2f} x {theirs:g})"


def metrics(facts: Sequence[ResultFacts]) -> list[str]:
    """Headline metric, validity, accuracy line and power per placed result."""
    if not facts:
        return []
    out = ["## Results", "", "| result | metric | validity | accuracy | power |",
           "|---|---|---|---|---|"]
    for f in facts:
        metric = f"{f.metric:,.4g} {f.unit}" if f.metric is not None else "—"
        power = "—"
        if f.energy_mj is not None:
            power = f"{f.energy_mj:.3g} mJ/query ({f.power_w:.1f} W)"
        elif f.power_w is not None:
            power = f"{f.power_w:.1f} W"
        out.append(f"| `{f.placed.result}` | {metric} | {f.validity or '—'} | "
                   f"{_short(f.accuracy) or '—'} | {power} |")
    return [*out, ""]


def failures(runs: Sequence[StoredRun], index: TreeIndex, precheck: PrecheckReport | None,
             checker: CheckerOutcome | None) -> list[str]:
    """Every failed run (latest attempt), result left out, precheck finding and checker error."""
    out = ["## Failures", ""]
    failed = [c.run for row in matrix(runs).values() for c in row.values() if not c.run.passed]
    for run in failed:
        verdict = run.record.verdict
        why = (verdict.reason if verdict else run.record.error) or run.record.state
        fix = f" Fix: {verdict.fix}" if verdict and verdict.fix else ""
        out.append(f"- Run `{run.spec.label}` (key `{run.record.key}`, attempt "
                   f"{run.record.attempt}): {why}.{fix}")
    for skipped in index.skipped:
        out.append(f"- Result {skipped.host}/{skipped.benchmark}/{skipped.scenario} left out: "
                   f"{skipped.reason}")
    for finding in (precheck.findings if precheck else []):
        if finding.severity != "warning":
            out.append(f"- Precheck {finding.line()}")
    if checker is not None:
        out += _checker_errors(checker, index.root)
        if checker.traceback:
            out += ["", "Checker traceback:", "", "```", checker.traceback[-3000:], "```"]
    if len(out) == 2:
        out.append("None.")
    warnings = index.warnings + [f.line() for f in (precheck.findings if precheck else [])
                                 if f.severity == "warning"]
    latest = [c.run for row in matrix(runs).values() for c in row.values()]
    warnings += [f"Run `{r.spec.label}`: {check.detail}" for r in latest if r.record.verdict
                 for check in r.record.verdict.checks if check.name == "ptd_identity"]
    if warnings:
        out += ["", "Warnings:", ""] + [f"- {w}" for w in warnings]
    return [*out, ""]


def _checker_errors(checker: CheckerOutcome, root: str) -> list[str]:
    """The checker's errors per result, paths shortened, its per-class summaries left out."""
    by_result: dict[str, list[str]] = {}
    for error in checker.errors:
        if error.message.startswith(("Some ", "NoResults")):
            continue  # "Some performance checks Checks failed for: ..." repeats the errors
        text = error.message.replace(root.rstrip("/") + "/", "")
        if error.result:  # paths inside the result, relative to its folder
            text = re.sub(rf"\S*results/{re.escape(error.result)}/?", "", text).strip() or text
        by_result.setdefault(error.result or "(tree)", []).append(text)
    out = []
    for result, messages in sorted(by_result.items()):
        shown = "; ".join(_short(m, 220) for m in messages[:6])
        more = f" (and {len(messages) - 6} more)" if len(messages) > 6 else ""
        out.append(f"- Checker on `{result}`: {shown}{more}")
    return out


def artefacts(index: TreeIndex, index_file: Path, tarball: Tarball | None,
              checker: CheckerOutcome | None) -> list[str]:
    """Where the tree, its index, the tarball, the checker's output and every run lie."""
    out = ["## Where things are", "", f"- Submission tree: `{index.root}`",
           f"- Tree index (which run made which folder): `{index_file}`"]
    if tarball:
        out.append(f"- Tarball: `{tarball.path}`")
    if checker and checker.log_path:
        out.append(f"- Official checker log: `{checker.log_path}`")
    out += ["", "| result | tree folder | runs (run-store folder) |", "|---|---|---|"]
    for placed in index.results:
        runs = "<br>".join(f"{kind}: `{ref.folder}`" for kind, ref in placed.runs.items())
        out.append(f"| `{placed.result}` | `{placed.folder}` | {runs} |")
    return [*out, ""]


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"
