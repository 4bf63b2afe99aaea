"""The campaign report: Markdown (also returned as a string, for Prefect artifacts) and a
self-contained HTML page with the figures embedded as PNG data.

Sections: outcome (prechecks, official checker, tarball), the result x run-kind matrix with
verdicts, headline metrics, estimate vs actual, figures, failures with their reasons, and where
every artefact lies.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from pydantic import BaseModel

from bench.plan_record import Comparison
from bench.tuning_record import TuningRecord
from submission import estimates_view, plots, sections, telemetry_view, tuning_view
from submission.checker import CheckerOutcome
from submission.facts import ResultFacts, matrix, result_facts
from submission.index import TreeIndex, index_path
from submission.inputs import StoredRun
from submission.layout import Layout, Style
from submission.precheck import PrecheckReport
from submission.tarball import Tarball

STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#1f2933}table{border-collapse:collapse;margin:1em 0;font-size:.9em}td,th{border:1px solid
#cbd2d9;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f0f4f8}code{background:
#f0f4f8;padding:0 .2em}img{max-width:100%}h1{border-bottom:2px solid #3b7dd8}"""


@dataclass(frozen=True)
class ReportInput:
    """Everything a campaign report shows."""

    title: str
    mode: str  # "submission" or "short"
    index: TreeIndex
    runs: Sequence[StoredRun]  # every attempt in the run store, failed ones included
    precheck: PrecheckReport | None = None
    checker: CheckerOutcome | None = None
    tarball: Tarball | None = None
    estimates: Comparison | None = None  # the kept plan's estimates against the store
    tunings: Sequence[TuningRecord] = ()  # the tuning records the runs took their values from


class ReportFiles(BaseModel):
    """Where the report was written, and its Markdown text."""

    markdown: str
    markdown_path: str
    html_path: str
    figures: list[str]


def write_report(data: ReportInput, out_dir: Path) -> ReportFiles:
    """Write report.md, report.html and the figures into out_dir; return the Markdown too."""
    out_dir.mkdir(parents=True, exist_ok=True)
    layout = Layout(Path(data.index.root), data.index.division, data.index.submitter,
                    Style(data.index.style))
    facts = [result_facts(layout, placed, data.runs) for placed in data.index.results]
    figures = _figures(facts)
    figures.update(telemetry_view.figures(data.runs))  # under the power trace
    figures.update(estimates_view.figures(data.estimates))
    figures.update(tuning_view.figures(data.tunings))
    for name, png in figures.items():
        (out_dir / name).write_bytes(png)
    markdown = render_markdown(data, facts, list(figures))
    md_path = out_dir / "report.md"
    md_path.write_text(markdown)
    html_path = out_dir / "report.html"
    html_path.write_text(render_html(data.title, markdown, out_dir))
    return ReportFiles(markdown=markdown, markdown_path=str(md_path), html_path=str(html_path),
                       figures=[str(out_dir / n) for n in figures])


def render_markdown(data: ReportInput, facts: Sequence[ResultFacts],
                    figures: Sequence[str]) -> str:
    """The report as Markdown; figures are referenced by file name."""
    index = data.index
    out = [f"# {data.title}: MLPerf Inference {index.round}, {index.division} division, "
           f"{index.submitter}", ""]
    if data.mode == "short":
        out += ["> Short mode: durations and counts were shortened; nothing here is "
                "submittable.", ""]
    out += sections.outcome(data.precheck, data.checker, data.tarball, index)
    out += sections.run_matrix(matrix(data.runs))
    out += sections.metrics(facts)
    out += sections.audits(data.runs)
    out += estimates_view.section(data.estimates)
    if figures:
        out += ["## Figures", ""] + [f"![{name}]({name})\n" for name in figures]
    out += telemetry_view.section(data.runs)
    out += tuning_view.section(data.tunings)
    out += sections.failures(data.runs, index, data.precheck, data.checker)
    out += sections.artefacts(index, index_path(Path(index.root)), data.tarball, data.checker)
    return "\n".join(out).rstrip() + "\n"


def render_html(title: str, markdown: str, figure_dir: Path) -> str:
    """A self-contained HTML page of the Markdown, with figures inlined as PNG data URIs."""
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)

    def inline(match: re.Match[str]) -> str:
        path = figure_dir / match.group(1)
        if not path.is_file():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f'src="data:image/png;base64,{data}"'

    body = re.sub(r'src="([\w.-]+\.png)"', inline, body)
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{_escape(title)}"
            f"</title><style>{STYLE}</style></head><body>\n{body}</body></html>\n")


def _figures(facts: Sequence[ResultFacts]) -> dict[str, bytes]:
    figures: dict[str, bytes] = {}
    by_unit: dict[str, dict[str, float]] = {}
    for f in facts:
        if f.metric is not None:
            by_unit.setdefault(f.unit, {})[f.placed.result] = f.metric
    for unit, values in sorted(by_unit.items()):
        kind = "throughput" if unit == "samples/s" else "latency"
        png = plots.metric_bars(values, unit, f"Headline {kind} per result ({unit})")
        if png:
            figures[f"{kind}.png"] = png
    # Offline issues one query: its "percentiles" are one latency, not a distribution
    curves = {f.placed.result: f.latency_ms for f in facts if f.placed.scenario != "Offline"}
    if png := plots.latency_percentiles(curves, "Latency percentiles (performance runs)"):
        figures["latency_percentiles.png"] = png
    traces = [t for f in facts for t in f.traces]
    if png := plots.power_trace(traces, "Power during the power runs"):
        figures["power.png"] = png
    return figures


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
