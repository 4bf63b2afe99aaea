"""Prechecks over a generated 100-result tree; print the seconds they take (budget: < 1 s).

    .venv/bin/python benchmarks/precheck.py [--results 100]

The tree is made from real short-mode LoadGen runs (testkit.submission_runs: resnet on an
edge system, SingleStream, MultiStream and Offline with accuracy, TEST01 and TEST04), assembled
once in the open division, then its system is replicated (hard links) until the tree holds the
requested number of results. Each result has four detail logs to read.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.rules import load_rules  # noqa: E402  (after the path is set)
from submission.assemble import TreeRequest, assemble  # noqa: E402
from submission.inputs import SystemInput  # noqa: E402
from submission.layout import find_layouts  # noqa: E402
from submission.precheck import precheck  # noqa: E402
from testkit.submission_runs import SYSTEM, real_runs, runs_of, tiny_benchmark  # noqa: E402

BUDGET_S = 1.0


def replicate(tree: Path, dest: Path, *, systems: int) -> Path:
    """A copy of tree whose every system is repeated `systems` times (files hard-linked)."""
    shutil.copytree(tree, dest, copy_function=os.link)
    for layout in find_layouts(dest):
        for system in sorted(p for p in layout.results_dir.iterdir() if p.is_dir()):
            description = layout.system_json(system.name)
            for n in range(1, systems):
                shutil.copytree(system, system.with_name(f"{system.name}_{n:03d}"),
                                copy_function=os.link)
                os.link(description, layout.system_json(f"{system.name}_{n:03d}"))
    return dest


def base_tree(work: Path) -> Path:
    store = real_runs(work / "runs")
    system = {k: "N/A" for k in ("host_processor_caches", "host_processor_interconnect")}
    request = TreeRequest(root=work / "tree", division="open", submitter="ACME", round="v6.1")
    assemble(request, runs_of(store), {"local": SystemInput("tinybox", {**SYSTEM, **system})},
             {"tiny": tiny_benchmark(work / "ctx")})
    return request.root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=100)
    args = parser.parse_args()
    rules = load_rules("v6.1")
    with tempfile.TemporaryDirectory(prefix="subrun-precheck-") as tmp:
        work = Path(tmp)
        tree = base_tree(work)
        per_system = precheck(tree, rules).results_checked
        big = replicate(tree, work / "big", systems=math.ceil(args.results / per_system))
        times, report = [], None
        for _ in range(5):
            report = precheck(big, rules)
            times.append(report.seconds)
        assert report is not None
        logs = sum(1 for _ in big.rglob("mlperf_log_detail.txt"))
        print(f"{report.results_checked} results, {logs} detail logs: prechecks took "
              f"median {statistics.median(times):.3f} s (min {min(times):.3f}, max "
              f"{max(times):.3f}); budget {BUDGET_S} s")
        print(report.summary())
        return 0 if statistics.median(times) < BUDGET_S and report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
