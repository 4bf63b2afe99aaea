"""Server tuning against an exhaustive sweep: digits on one lab host, the same probe runs.

    .venv/bin/python benchmarks/server_tuning.py [--host h2] [--probe-s 10] [--confirm-s 60]
        [--grid first:last:count] [--resolution 0.02] [--margin 0.05] [--seed 1]

First one Offline probe measures the host's throughput T; the Server search starts there, as a
campaign's does. The tuning search (bench.tuning, a fresh book) finds the highest VALID Server
target_qps and confirms the chosen value with one probe of --confirm-s (the official run's
length). Every target of the grid (default: 40 targets from 0.2 T to 0.6 T, 2.9 % apart) is
probed once with the same probe duration as the search's.

The sweep and the search share the machine's time: the sweep's targets run in a shuffled
order (--seed), a few of them before each of the search's probes, the rest after it. A shared
machine's speed drifts from one minute to the next (the same CPU work can take twice as long);
a sweep run in ascending order after the search would tie its targets to those minutes, and
the two would measure different machines. Shuffled and interleaved, both sample the same
minutes.

Prints three readings of the sweep, because on a drifting machine VALID and INVALID overlap:
the threshold that best separates them (the target t for which "VALID up to t, INVALID above"
misclassifies fewest probes: the host's capacity, read robustly; with the band of thresholds
that misclassify at most one probe more, which one unlucky probe separates from it), the
highest VALID target below the lowest INVALID one (the search's bracket, were each target
probed once), and the highest VALID anywhere.
Then the value the search found, its difference from each in %, and what each cost (the
probes' own seconds, the confirmations' apart, and the wall time). The issue's target: within
5 % of the sweep at no more than a third of its cost.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.campaign import BenchmarkPlan  # noqa: E402  (after the path is set)
from bench.loadgen_build import probe_loadgen  # noqa: E402
from bench.manifest import load_manifest  # noqa: E402
from bench.plan import targets_for  # noqa: E402
from bench.rules import load_rules  # noqa: E402
from bench.run import Scenario  # noqa: E402
from bench.store import RunStore  # noqa: E402
from bench.target import RunTarget  # noqa: E402
from bench.tune_search import SearchConfig, bracket, tuned_key  # noqa: E402
from bench.tuning import TuneJob, run_probe, tune  # noqa: E402
from bench.tuning_record import Probe, TuningBook, TuningKey  # noqa: E402
from lab.config import load_inventory  # noqa: E402
from lab.docker import Engine  # noqa: E402
from lab.provision import ProvisionOptions, provision  # noqa: E402
from lab.transport import open_host  # noqa: E402

SERVER = Scenario.SERVER
SWEEP_PER_SEARCH_PROBE = 3  # sweep probes run before each of the search's


def target_on(host: str) -> RunTarget:
    """digits provisioned on a host of the test lab (built or shipped as hosts.yaml says)."""
    inventory = load_inventory(ROOT / ".lab" / "hosts.yaml")
    config, local = inventory.host(host), inventory.host("local")
    manifest = load_manifest("digits")
    connection = open_host(config)
    result = provision(Engine(connection, config.docker), manifest.image_spec(),
                       controller=Engine(open_host(local), local.docker),
                       options=ProvisionOptions(pull_base=False))
    return RunTarget(connection, config, manifest, result.image, result.image_id, "bench-tune")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="h2")
    parser.add_argument("--probe-s", type=float, default=10.0)
    parser.add_argument("--confirm-s", type=float, default=60.0)
    parser.add_argument("--grid", default="0.2:0.6:40",
                        help="first:last:count, as shares of the Offline throughput")
    parser.add_argument("--resolution", type=float, default=0.02)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1, help="the sweep's shuffled order")
    args = parser.parse_args()
    target = target_on(args.host)
    manifest, rules = load_manifest("digits"), load_rules("v6.1")
    key = TuningKey(args.host, "digits", SERVER, target.image_id, probe_loadgen().version,
                    "v6.1")
    job = TuneJob(key=key, start=1000.0, model=manifest.official_model,
                  targets=targets_for(BenchmarkPlan(benchmark="digits"), manifest, SERVER),
                  fresh=True, config=SearchConfig(resolution=args.resolution,
                                                  margin=args.margin, confirm_s=args.confirm_s),
                  probe_s=args.probe_s)
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="subrun-server-tuning-") as tmp:
        store, book = RunStore(Path(tmp) / "store"), TuningBook(Path(tmp) / "tuning")
        offline = tune(target, replace(job, key=key._replace(scenario=Scenario.OFFLINE),
                                       targets=targets_for(BenchmarkPlan(benchmark="digits"),
                                                           manifest, Scenario.OFFLINE)),
                       book, store, rules)
        throughput = offline.found or 1000.0
        grid = parse_grid(args.grid, throughput)
        print(f"Offline: {throughput:.0f} samples/s; grid {grid[0]:g}..{grid[-1]:g} "
              f"({len(grid)} targets)")
        job = replace(job, start=throughput)
        order = list(grid)
        random.Random(args.seed).shuffle(order)
        sweep: dict[float, Probe] = {}
        clock = {"search": 0.0, "sweep": 0.0}

        def sweep_some(count: int) -> None:
            began = time.monotonic()
            for qps in order[len(sweep):len(sweep) + count]:
                sweep[qps] = run_probe(target, job, qps, store, rules)
                print(f"  sweep {len(sweep)}/{len(grid)}: {_line(sweep[qps])}", flush=True)
            clock["sweep"] += time.monotonic() - began

        @contextmanager
        def interleaved(label: str) -> Iterator[None]:
            sweep_some(SWEEP_PER_SEARCH_PROBE)
            began = time.monotonic()
            yield
            clock["search"] += time.monotonic() - began

        record = tune(target, job, book, store, rules, around=interleaved,
                      on_probe=lambda r, p: print(f"  tuning probe {len(r.probes)}"
                                                  f"{' (confirmation)' if p.confirm else ''}: "
                                                  f"{_line(p)}", flush=True))
        sweep_some(len(grid))
        swept = [sweep[q] for q in grid]
    chosen = float(record.chosen[tuned_key(SERVER)]) if record.chosen else None
    separating, errors = separating_threshold(grid, [p.valid for p in swept])
    band = threshold_band(grid, [p.valid for p in swept])
    below, _ = bracket(SERVER, swept)
    highest = max((q for q, p in zip(grid, swept, strict=True) if p.valid), default=None)
    sweep_s = sum(p.duration_s for p in swept)
    searched_s = sum(p.duration_s for p in record.probes if not p.confirm)
    confirms = [p for p in record.probes if p.confirm]
    print(f"load average after: {os.getloadavg()}")
    print(f"sweep: {len(grid)} probes of {args.probe_s:g} s over {grid[0]:g}..{grid[-1]:g}, "
          f"{sweep_s:.0f} s of probes, {clock['sweep']:.0f} s wall")
    print(f"  separating threshold {separating} ({errors} of {len(grid)} probes on the wrong "
          f"side); highest VALID below the lowest INVALID {below}; highest VALID {highest}")
    if band:
        print(f"  thresholds within one probe of it: {band[0]:g}..{band[1]:g}")
    print(f"tuning: {len(record.probes) - len(confirms)} probes: found {record.found}, "
          f"{searched_s:.0f} s of probes; {len(confirms)} confirmation(s) of "
          f"{args.confirm_s:g} s: {sum(p.duration_s for p in confirms):.0f} s; chosen {chosen}; "
          f"{clock['search']:.0f} s wall")
    for p in confirms:
        print(f"  confirmation: {_line(p)}")
    if record.found:
        for name, value in (("separating threshold", separating),
                            ("highest VALID below the lowest INVALID", below),
                            ("highest VALID", highest)):
            if value:
                print(f"found vs the sweep's {name}: "
                      f"{100 * (record.found - value) / value:+.1f} %")
        if band:
            print(f"found vs the thresholds within one probe of the best: "
                  f"{from_band(record.found, band)}")
        print(f"cost: {searched_s / sweep_s:.2f} of the sweep's probe time "
              f"({record.cost_s / sweep_s:.2f} with the confirmations)")


def separating_threshold(grid: list[float], valid: list[bool]) -> tuple[float | None, int]:
    """The VALID target t for which "VALID up to t, INVALID above" misclassifies fewest of the
    sweep's probes (the median of the ties), and that count."""
    candidates = _misclassified(grid, valid)
    if not candidates:
        return None, sum(valid)
    fewest = min(errors for errors, _ in candidates)
    ties = sorted(t for errors, t in candidates if errors == fewest)
    return ties[len(ties) // 2], fewest


def threshold_band(grid: list[float], valid: list[bool]) -> tuple[float, float] | None:
    """The lowest and highest thresholds misclassifying at most one probe more than the best:
    those the sweep cannot tell from its best reading, one unlucky probe apart."""
    candidates = _misclassified(grid, valid)
    if not candidates:
        return None
    fewest = min(errors for errors, _ in candidates)
    near = [t for errors, t in candidates if errors <= fewest + 1]
    return min(near), max(near)


def _misclassified(grid: list[float], valid: list[bool]) -> list[tuple[int, float]]:
    """(probes on the wrong side, t) for each VALID target t taken as the threshold."""
    return [(sum(1 for q, ok in zip(grid, valid, strict=True) if (q <= t) != ok), t)
            for t, v in zip(grid, valid, strict=True) if v]


def from_band(found: float, band: tuple[float, float]) -> str:
    """Where a value lies against a band: inside, or how far above or below it in %."""
    low, high = band
    if found > high:
        return f"{100 * (found - high) / high:+.1f} % above it"
    if found < low:
        return f"{100 * (found - low) / low:+.1f} % below it"
    return "inside it"


def parse_grid(text: str, throughput: float) -> list[float]:
    """first:last:count shares of the throughput, spaced geometrically, rounded as user.conf
    values are."""
    first, last, count = (float(x) for x in text.split(":"))
    n = max(2, int(count))
    ratio = (last / first) ** (1 / (n - 1))
    return [float(f"{throughput * first * ratio ** i:.4g}") for i in range(n)]


def _line(probe: Probe) -> str:
    latency = f"p99 {probe.latency_ns / 1e6:.3g} ms" if probe.latency_ns else "no latency"
    return (f"{probe.settings.get(tuned_key(SERVER))} -> {'VALID' if probe.valid else 'INVALID'}"
            f" ({probe.samples_per_s or 0:.0f} samples/s, {latency}, {probe.duration_s:.0f} s)")


if __name__ == "__main__":
    main()
