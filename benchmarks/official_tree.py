"""Full-duration evidence: a closed resnet edge tree from real LoadGen runs, through the checker.

    SUBRUN_INFERENCE_REPO=<checkout of mlcommons/inference> \\
        .venv/bin/python benchmarks/official_tree.py --out /var/tmp/subrun-official [--minutes 10]

Runs the tiny SUT of the tests (a sleeping SUT: little CPU) with the official settings of the
round (LoadGen's built-in mlperf.conf: 600 s minimum duration, the round's seeds), SingleStream,
MultiStream and Offline in parallel, each with performance, accuracy (50,000 samples), TEST01
and TEST04 verified by bench.compliance; judges and stores every run; assembles the closed tree;
runs the prechecks and the official checker with --version v6.1; prints the outcome. About
35 minutes. With --minutes below 10 the runs are short and the checker reports the duration.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.rules import load_rules  # noqa: E402  (after the path is set)
from bench.run import Mode, RunKind  # noqa: E402
from bench.store import RunStore  # noqa: E402
from collectors.describe import describe  # noqa: E402
from lab.config import load_inventory  # noqa: E402
from submission.assemble import TreeRequest, assemble  # noqa: E402
from submission.checker import inference_repo_from_env, run_checker  # noqa: E402
from submission.inputs import SystemInput  # noqa: E402
from submission.precheck import precheck  # noqa: E402
from submission.sources import stored_runs  # noqa: E402
from testkit.loadgen_run import TinySut  # noqa: E402
from testkit.submission_runs import one_run, tiny_benchmark  # noqa: E402

# official runs: only the expected latency / throughput is set, mlperf.conf does the rest
SLEEP_US = {"SingleStream": 1000, "MultiStream": 250, "Offline": 1000}
EXPECTED = {"SingleStream": {"target_latency": 1}, "MultiStream": {"target_latency": 2},
            "Offline": {"target_qps": 1000}}


def scenario_runs(store: RunStore, work: Path, scenario: str, minutes: float) -> None:
    settings = dict(EXPECTED[scenario])
    if minutes < 10:
        settings["min_duration"] = int(minutes * 60000)
    sut = TinySut(sample_time_us=SLEEP_US[scenario])
    started, limit = time.time(), minutes * 60 * 2 + 120
    mode = Mode.SUBMISSION if minutes >= 10 else Mode.SHORT
    perf = one_run(store, work, scenario, "performance", settings=settings, sut=sut,
                   timeout_s=limit, mode=mode)
    acc = one_run(store, work, scenario, "accuracy", settings=settings, timeout_s=limit,
                  mode=mode)
    refs = {RunKind.PERFORMANCE: perf.record, RunKind.ACCURACY: acc.record}
    for kind in ("TEST01", "TEST04"):
        for _ in range(2):
            run = one_run(store, work, scenario, kind, refs=refs, settings=settings, sut=sut,
                          timeout_s=limit, mode=mode)
            print(f"{scenario} {kind}: {'pass' if run.passed else run.record.verdict}",
                  flush=True)
            if run.passed:
                break
    print(f"{scenario}: runs done in {(time.time() - started) / 60:.1f} min", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/var/tmp/subrun-official"))
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--reuse", action="store_true", help="assemble the runs already stored")
    args = parser.parse_args()
    store = RunStore(args.out / "store")
    if not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
        work = args.out / "work"
        with ThreadPoolExecutor(3) as pool:
            for done in [pool.submit(scenario_runs, store, work, s, args.minutes)
                         for s in ("SingleStream", "MultiStream", "Offline")]:
                done.result()
    rules = load_rules("v6.1")
    filled = {"framework": "LoadGen 6.0.17, Python 3.11", "other_software_stack": "Debian 12",
              "host_memory_configuration": "N/A (virtual machine)", "system_type": "edge"}
    system = describe(load_inventory(), "local", campaign=filled).system
    request = TreeRequest(root=args.out / "tree", division="closed", submitter="ACME",
                          round="v6.1", required_tests=lambda m: [
                              k.value for k in rules.model(m).compliance or ()])
    index = assemble(request, stored_runs(store), {"local": SystemInput("tinybox", system)},
                     {"tiny": tiny_benchmark(args.out / "ctx")})
    print(f"assembled {len(index.results)} results, left out {len(index.skipped)}")
    for skipped in index.skipped:
        print("  left out:", skipped.scenario, skipped.reason)
    report = precheck(request.root, rules)
    print(report.summary())
    for finding in report.findings:
        print("  ", finding.line())
    repo = inference_repo_from_env()
    if repo is None:
        print("SUBRUN_INFERENCE_REPO is not set: official checker not run")
        return 0 if report.passed else 1
    outcome = run_checker(request.root, repo, rules.checker_version, work_dir=args.out / "checker")
    print(f"official checker: exit {outcome.exit_status}, {outcome.summary!r}, "
          f"crashed={outcome.crashed}, counts={outcome.counts}")
    for result, metric in sorted(outcome.results.items()):
        print(f"  Results {result} {metric}")
    for error in outcome.errors:
        print(f"  ERROR {error.message}")
    print(f"log: {outcome.log_path}")
    return 0 if outcome.ok and report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
