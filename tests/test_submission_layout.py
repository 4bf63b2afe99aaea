"""Where the layout puts things, in both styles (reference/checker.md §1.1, §1.2)."""

from __future__ import annotations

from pathlib import Path

from submission.index import index_path
from submission.layout import FOLDER_RULES, Layout, ResultKey, Style, find_layouts

KEY = ResultKey("box", "resnet", "Offline")


def rel(layout: Layout, path: Path) -> str:
    return layout.relative(path)


def test_v6_keeps_everything_of_a_result_under_results() -> None:
    layout = Layout(Path("/t"), "closed", "ACME")
    assert rel(layout, layout.system_json("box")) == "closed/ACME/systems/box.json"
    assert rel(layout, layout.src_benchmark_dir("resnet", "digits")) == "closed/ACME/src/digits"
    base = "closed/ACME/results/box/resnet/Offline"
    assert rel(layout, layout.measurements_json(KEY, "impl")) == f"{base}/measurements.json"
    assert rel(layout, layout.user_conf(KEY)) == f"{base}/user.conf"
    assert rel(layout, layout.run_1(KEY)) == f"{base}/performance/run_1"
    assert rel(layout, layout.ranging(KEY)) == f"{base}/performance/ranging"
    assert rel(layout, layout.power(KEY)) == f"{base}/performance/power"
    assert rel(layout, layout.test_run_1(KEY, "TEST04")) == f"{base}/TEST04/performance/run_1"
    assert rel(layout, layout.test_accuracy_dir(KEY, "TEST01")) == f"{base}/TEST01/accuracy"
    assert rel(layout, layout.calibration_md) == "closed/ACME/documentation/calibration.md"


def test_v5_splits_measurements_compliance_and_code() -> None:
    layout = Layout(Path("/t"), "closed", "ACME", Style.V5)
    assert rel(layout, layout.measurements_json(KEY, "impl")) == (
        "closed/ACME/measurements/box/resnet/Offline/box_impl_Offline.json")
    assert rel(layout, layout.readme(KEY)) == (
        "closed/ACME/measurements/box/resnet/Offline/README.md")
    assert rel(layout, layout.test_dir(KEY, "TEST01")) == (
        "closed/ACME/compliance/box/resnet/Offline/TEST01")
    assert rel(layout, layout.accuracy_dir(KEY)) == (
        "closed/ACME/results/box/resnet/Offline/accuracy")
    assert rel(layout, layout.src_benchmark_dir("resnet", "digits")) == (
        "closed/ACME/code/resnet/digits")


def test_folder_rules_compare_exact_sets_with_the_checkers_tolerance() -> None:
    rule = FOLDER_RULES["performance/run_1"]
    logs = {"mlperf_log_summary.txt", "mlperf_log_detail.txt"}
    assert rule.mismatch(logs | {"mlperf_log_trace.json", ".gitkeep"}) == (set(), set())
    assert rule.mismatch(logs | {"spl.txt"}) == (set(), {"spl.txt"})
    assert FOLDER_RULES["performance/run_1+power"].mismatch(logs) == ({"spl.txt"}, set())
    assert FOLDER_RULES["TEST01/accuracy"].mismatch({"mlperf_log_accuracy.json"}) == (
        {"accuracy.txt"}, set())


def test_layouts_are_found_like_the_checker_walks(tmp_path: Path) -> None:
    for division in ("closed", "open", "other"):
        (tmp_path / division / "ACME" / "results" / "box" / "resnet" / "Offline").mkdir(
            parents=True)
    found = [(lay.division, lay.submitter) for lay in find_layouts(tmp_path)]
    assert found == [("closed", "ACME"), ("open", "ACME")]  # other top-level folders ignored
    assert Layout(tmp_path, "open", "ACME").result_keys() == [KEY]
    assert index_path(tmp_path / "tree") == tmp_path / "tree.index.json"
