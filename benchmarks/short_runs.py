"""How stable the figure a short run is compared on is, per query count: the data behind
bench/short_mode.yaml.

    .venv/bin/python benchmarks/short_runs.py [--repeats 5] [--seconds 3] [--cpu 1]
        [--scenarios SingleStream MultiStream Server]

Runs the digits benchmark's harness (images/digits, its model trained into a temporary folder,
real LoadGen) on this machine, pinned to --cpu as the demo's runs are, `--repeats` consecutive
short runs per scenario and query count, and prints for each the figure a compliance test is
compared on (the early-stopping latency of SingleStream and MultiStream, the completed rate of
Server), its spread (max / min - 1) and the share of consecutive pairs within the +-10 % bound
TEST01/TEST04 apply. An INVALID run is marked with *. Run it on a busy machine too: that is
where short statistics fail.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen_log import read_detail  # noqa: E402
from bench.manifest import load_manifest  # noqa: E402
from bench.run import Scenario  # noqa: E402
from bench.short_sizes import short_sizes  # noqa: E402

COUNTS = {"SingleStream": [64, 1000, 4000], "MultiStream": [662, 2000, 10000],
          "Server": [459, 4000, 16000]}
BOUND = 0.10  # TEST01/TEST04's performance bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--cpu", default="1", help="core list for taskset ('' for none)")
    parser.add_argument("--scenarios", nargs="+", default=list(COUNTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="short-runs-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'images/base'}:{ROOT / 'images/digits'}",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        model = work / "model"
        subprocess.run([sys.executable, "-m", "digits_bench.train",
                        str(model / "digits-mlp.pkl")], env=env, check=True,
                       capture_output=True)
        chosen = short_sizes().compared_min_query_count
        print(f"{'scenario':<13}{'queries':>8}  {'figure':<24}{'runs':<56}"
              f"{'spread':>7}  pairs within 10 %")
        for scenario in args.scenarios:
            for count in COUNTS[scenario]:
                runs = [one_run(work, env, model, scenario, count, args, i)
                        for i in range(args.repeats)]
                report(scenario, count, runs, chosen.get(Scenario(scenario)) == count)


def one_run(work: Path, env: dict[str, str], model: Path, scenario: str, count: int,
            args: argparse.Namespace, i: int) -> tuple[float, bool]:
    """One short LoadGen run; its compared figure and whether LoadGen judged it VALID."""
    run = work / f"{scenario}-{count}-{i}"
    run.mkdir()
    keys: dict[str, object] = {"min_duration": int(args.seconds * 1000),
                               "min_query_count": count}
    defaults = load_manifest("digits").user_conf_defaults(Scenario(scenario))  # the demo's
    keys["target_qps" if scenario == "Server" else "target_latency"] = defaults[
        "target_qps" if scenario == "Server" else "target_latency"]
    (run / "user.conf").write_text("".join(f"*.{scenario}.{k} = {v}\n" for k, v in keys.items()))
    pin = ["taskset", "-c", args.cpu] if args.cpu else []
    subprocess.run([*pin, sys.executable, "-m", "digits_bench", "--scenario", scenario,
                    "--mode", "PerformanceOnly", "--model", "resnet50", "--model-dir", str(model),
                    "--output-dir", str(run / "out")], cwd=run, env=env, check=True,
                   capture_output=True)
    log = read_detail(run / "out" / "mlperf_log_detail.txt")
    if scenario == "Server":
        figure = float(log.get("result_completed_samples_per_sec") or 0)
    else:
        key = "early_stopping_latency_ss" if scenario == "SingleStream" \
            else "early_stopping_latency_ms"
        figure = float(log.get(key) or log.get("result_99.00_percentile_latency_ns") or 0)
    return figure, log.get("result_validity") == "VALID"


def report(scenario: str, count: int, runs: list[tuple[float, bool]], chosen: bool) -> None:
    figures = [f for f, _ in runs]
    what = "completed samples/s" if scenario == "Server" else "early-stopping latency"
    shown = " ".join(f"{_fmt(scenario, f)}{'' if ok else '*'}" for f, ok in runs)
    low = min(figures) or 1.0
    pairs = list(itertools.pairwise(figures))
    within = sum(abs(b / a - 1) <= BOUND for a, b in pairs if a) if pairs else 0
    mark = "  <- short_mode.yaml" if chosen else ""
    print(f"{scenario:<13}{count:>8}  {what:<24}{shown:<56}{max(figures) / low - 1:>6.0%}  "
          f"{within}/{len(pairs)} (median {_fmt(scenario, statistics.median(figures))})"
          f"{mark}")


def _fmt(scenario: str, figure: float) -> str:
    return f"{figure:.0f}" if scenario == "Server" else f"{figure / 1000:.1f}us"


if __name__ == "__main__":
    main()
