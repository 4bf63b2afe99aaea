"""The campaign report from real runs: the run matrix with verdicts, metrics, figures (power
included), failures with reasons, where things are; Markdown returned and a self-contained HTML."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from bench.rules import load_rules
from bench.run import RunKind, Verdict
from power.wrap import power_metrics
from submission.assemble import TreeRequest, assemble
from submission.checker import parse_checker_output
from submission.facts import result_facts
from submission.inputs import StoredRun, SystemInput
from submission.layout import Layout, Style
from submission.precheck import precheck
from submission.report import ReportInput, write_report
from submission.tarball import pack
from testkit.submission_runs import SYSTEM, real_runs, runs_of, tiny_benchmark

RULES = load_rules("v6.1")
SAMPLES = Path(__file__).parent / "samples" / "submission"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[StoredRun]:
    return runs_of(real_runs(tmp_path_factory.getbasetemp() / "submission-runs"))


def report_for(tmp_path: Path, runs: list[StoredRun], *, with_checker: bool = True):  # type: ignore[no-untyped-def]
    request = TreeRequest(root=tmp_path / "tree", division="closed", submitter="ACME",
                          round="v6.1", required_tests=lambda m: [
                              k.value for k in RULES.model(m).compliance or ()])
    index = assemble(request, runs, {"local": SystemInput("tinybox", SYSTEM)},
                     {"tiny": tiny_benchmark(tmp_path / "ctx")})
    checker = parse_checker_output((SAMPLES / "checker_short_mode.log").read_text(), 1, None) \
        if with_checker else None
    data = ReportInput(title="demo", mode="short", index=index, runs=runs,
                       precheck=precheck(request.root, RULES), checker=checker,
                       tarball=pack(request.root, tmp_path / "tree.tar.gz"))
    return index, write_report(data, tmp_path / "report")


def test_markdown_shows_matrix_metrics_and_where_things_are(tmp_path: Path,
                                                            runs: list[StoredRun]) -> None:
    index, report = report_for(tmp_path, runs)
    md = report.markdown
    assert md == Path(report.markdown_path).read_text()
    assert "Short mode" in md and "MLPerf Inference v6.1, closed division, ACME" in md
    rows = [line for line in md.splitlines() if line.startswith("| local | tiny |")]
    assert {row.split("|")[3].strip() for row in rows} == {"SingleStream", "MultiStream",
                                                           "Offline"}
    offline = next(row for row in rows if "| Offline |" in row)
    assert offline.count("pass") == 5  # performance, accuracy, TEST01, TEST04, power
    for placed in index.results:
        assert f"| `{placed.result}` |" in md
        for ref in placed.runs.values():
            assert ref.folder in md  # every run's store folder is named
    power_row = next(line for line in md.splitlines() if line.startswith("| `tinybox/resnet/Off"))
    watts = float(re.search(r"([\d.]+) W", power_row).group(1))  # type: ignore[union-attr]
    assert 100 < watts < 200  # the simulated analyzer under load
    layout = Layout(Path(index.root), index.division, index.submitter, Style(index.style))
    placed = next(p for p in index.results if p.scenario == "Offline")
    power_run = next(r for r in runs if str(r.folder) == placed.runs["power"].folder)
    # the report's figure is the one the power verdict records, computed in one place
    assert result_facts(layout, placed, runs).power_w == power_metrics(power_run.folder)["power_w"]
    assert "samples/s" in power_row and "accuracy=100.000%" in power_row
    assert f"sha256 `{index.root}" not in md and "sha256 `" in md
    assert "Official checker: **errors**" in md and "Checker on `tinybox/resnet/Offline`" in md


def test_failures_carry_their_reasons(tmp_path: Path, runs: list[StoredRun]) -> None:
    """One run judged failed among passing ones: it alone is listed, with its reason and fix."""
    failing = next(r for r in runs if r.spec.kind is RunKind.ACCURACY
                   and r.spec.scenario.value == "SingleStream")
    verdict = Verdict(passed=False, reason="accuracy=41.000% is below the target 99.0%",
                      fix="Check the model's weights against the reference")
    record = failing.record.model_copy(update={"verdict": verdict})
    judged = [r if r is not failing else StoredRun(record, r.folder) for r in runs]
    _, report = report_for(tmp_path, judged, with_checker=False)
    failures = report.markdown.split("## Failures")[1].split("## Where")[0]
    latest: dict[tuple[str, str], StoredRun] = {}
    for run in sorted(judged, key=lambda r: (r.record.started_at, r.record.attempt)):
        latest[(run.spec.scenario.value, run.spec.kind.value)] = run
    failed = [r for r in latest.values() if not r.passed]
    assert [r.record for r in failed] == [record]  # both branches below are reached
    assert any(r.passed for r in latest.values())
    for run in latest.values():
        line = f"Run `{run.spec.label}` (key `{run.record.key}`, attempt {run.record.attempt})"
        assert (line in failures) == (not run.passed), line
    assert (f"Run `{failing.spec.label}` (key `{record.key}`, attempt {record.attempt}): "
            f"{verdict.reason}. Fix: {verdict.fix}") in failures
    assert "stays out of the tree" in failures  # the power run of subrun's own daemon
    assert "Official checker: not run" in report.markdown


def test_html_is_self_contained_with_the_figures(tmp_path: Path, runs: list[StoredRun]) -> None:
    _, report = report_for(tmp_path, runs)
    html = Path(report.html_path).read_text()
    names = sorted(Path(f).name for f in report.figures)
    assert names == ["latency.png", "latency_percentiles.png", "power.png", "throughput.png"]
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 4
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "<table>" in html and "src=\"power.png\"" not in html
    assert not re.search(r'(src|href)="(?!data:)[^"#]+"', html)  # nothing to fetch


def test_a_run_that_never_passed_is_listed(tmp_path: Path, runs: list[StoredRun]) -> None:
    failing = next((r for r in runs if r.spec.kind is RunKind.ACCURACY
                    and r.spec.scenario.value == "Offline"), None)
    assert failing is not None
    record = failing.record.model_copy(update={"state": "failed", "verdict": None,
                                               "error": "container exited 137"})
    broken = [r if r is not failing else StoredRun(record, r.folder) for r in runs]
    index, report = report_for(tmp_path, broken, with_checker=False)
    scenario = failing.spec.scenario.value
    assert scenario not in {r.scenario for r in index.results}
    assert "container exited 137" in report.markdown
    assert f"Result local/tiny/{scenario} left out: no passing accuracy run" in report.markdown
    assert "Latest attempts: accuracy: container exited 137" in report.markdown


def test_audits_name_derated_targets_and_reverified_tests(tmp_path: Path) -> None:
    from bench.run import Check, Scenario
    from bench.store import RunStore
    from submission.sections import audits
    from testkit.submission_runs import spec_for

    store = RunStore(tmp_path / "store")
    files = tmp_path / "files"
    files.mkdir()
    (files / "mlperf_log_summary.txt").write_text("stand-in\n")
    ok = Verdict(passed=True, checks=[Check(name="compliance", ok=True)])
    store.add_attempt(spec_for("Offline", "performance"), files, verdict=ok)
    perf = spec_for("Offline", "performance").model_copy(
        update={"scenario": Scenario.SERVER, "settings": {"*.Server.target_qps": 1000}})
    test01 = perf.model_copy(update={"kind": RunKind.TEST01,
                                     "settings": {"*.Server.target_qps": 960.0}})
    store.add_attempt(perf, files, verdict=ok)
    store.add_attempt(perf, files, verdict=ok)  # measured again at the same load
    store.add_attempt(test01, files, verdict=ok, references={"performance": 1})
    store.add_attempt(test01, files, verdict=ok, reverifies=1, references={"performance": 2})
    text = "\n".join(audits(runs_of(store)))
    assert ("| local/tiny/Server TEST01 | attempt 2 at target_qps 960 (0.96 x 1000) of "
            "performance attempt 2 |") in text
    assert "attempt 2: the logs of attempt 1 verified again against performance attempt 2" in text
    assert "Offline" not in text
