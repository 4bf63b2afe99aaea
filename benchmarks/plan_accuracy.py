"""Plan accuracy on the test lab: estimated vs actual wall time per host of a 2-host short
campaign with `tune: auto`, on a cold store and again on a warm one (targets when warm: within
15 %, no INVALID re-run).

    .venv/bin/python benchmarks/plan_accuracy.py [--hosts h2 h3] [--scenarios Offline ...]
        [--tune auto|false] [--work-dir DIR]

Runs `subrun run CAMPAIGN.yaml` as a person does (ephemeral Prefect API, a PREFECT_HOME of its
own under the work directory), twice, under one output folder: a cold campaign (nothing in any
store or tuning book: with `tune: auto` it tunes every key first, without it every estimate
rests on defaults), then a warm one under another name (nothing reused, but the first campaign's
tuning records, store and measured overheads inform every estimate). For
each it reads the kept plan (`plan.json`) against the store, as the report does, and prints per
host the estimate, the actual wall time and the difference, the estimates' bases, the number
of INVALID re-runs, and what tuning cost (its probes' seconds; a warm store tunes nothing).
Images are provisioned first by a one-run warm-up, so neither timed campaign builds anything.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.campaign import load_campaign  # noqa: E402
from bench.plan_record import compare, read_plan  # noqa: E402
from bench.run import RunKind  # noqa: E402
from bench.store import RunStore  # noqa: E402
from bench.tuning_record import TuningBook  # noqa: E402

LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
TARGET_PCT = 15.0


def campaign_file(folder: Path, name: str, hosts: list[str], scenarios: list[str],
                  output: Path, *, accuracy: bool = True, tune: str = "false") -> Path:
    """A short digits campaign on the lab's hosts."""
    campaign = {"name": name, "inventory": str(LAB / "hosts.yaml"), "round": "v6.1",
                "division": "open", "mode": "short", "accuracy": accuracy,
                "tune": {"auto": "auto", "true": True}.get(tune, False),
                "compliance": False, "power": False, "output_dir": str(output),
                "hosts": [{"host": h, "benchmarks": [{"benchmark": "digits",
                                                      "scenarios": scenarios}]}
                          for h in hosts]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return path


def run(path: Path, prefect_home: Path) -> float:
    """`subrun run` from this checkout; its wall time. Stops the script when it fails."""
    env = {**os.environ, "PREFECT_HOME": str(prefect_home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    log = path.with_suffix(".log")
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run([sys.executable, "-m", "flows", "run", str(path)], stdout=out,
                              stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        sys.exit(f"campaign {path.name} failed (exit {code}):\n{tail}")
    return time.monotonic() - started


def invalid_reruns(store: RunStore) -> int:
    """Attempts that re-ran a run LoadGen judged INVALID (tuning probes are not runs)."""
    count, keys = 0, store.keys()
    for key in keys:
        attempts = [a for a in store.attempts(key) if a.reverifies is None]
        if attempts and attempts[0].spec.kind is RunKind.TUNING:
            continue
        count += sum(1 for before in attempts[:-1]
                     if before.verdict and "INVALID" in before.verdict.reason)
    return count


def report(label: str, path: Path, wall_s: float) -> list[float]:
    """Print estimate vs actual per host; return each host's difference in percent."""
    campaign = load_campaign(path)
    kept = read_plan(campaign.paths.plan)
    if kept is None:
        sys.exit(f"{campaign.paths.plan}: no plan kept")
    store = RunStore(campaign.paths.store)
    found = compare(kept, store)
    bases = Counter(r.basis.value for r in kept.runs)
    tuning = [r for r in TuningBook(campaign.paths.tuning).records()
              if r.campaign == campaign.name]
    print(f"\n{label} ({campaign.name}): wall {wall_s / 60:.1f} min, bases {dict(bases)}, "
          f"INVALID re-runs {invalid_reruns(store)}, tuning {len(tuning)} searches, "
          f"{sum(len(r.probes) for r in tuning)} probes, {sum(r.cost_s for r in tuning):.0f} s")
    diffs = []
    for host in found.hosts:
        print(f"  {host.line()}")
        if host.diff_pct is not None:
            diffs.append(host.diff_pct)
    for r in found.runs:
        print(f"    {r.planned.label:45s} est {r.planned.estimate_s:6.1f} s  actual "
              f"{(r.actual_s or 0):6.1f} s  {r.planned.basis.value}")
    return diffs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", nargs="+", default=["h2", "h3"])
    parser.add_argument("--scenarios", nargs="+", default=["Offline", "SingleStream", "Server"])
    parser.add_argument("--tune", choices=["auto", "true", "false"], default="auto")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="subrun-plan-accuracy-"))
    work.mkdir(parents=True, exist_ok=True)
    home, output = work / "prefect", work / "out"
    print(f"work directory: {work}")
    # images provisioned once, in an output folder of its own: the timed stores stay cold
    run(campaign_file(work, "provision", args.hosts, ["Offline"], work / "warm-up",
                      accuracy=False), home)
    cold = campaign_file(work, "cold", args.hosts, args.scenarios, output, tune=args.tune)
    cold_s = run(cold, home)
    warm = campaign_file(work, "warm", args.hosts, args.scenarios, output, tune=args.tune)
    warm_s = run(warm, home)
    report("cold store", cold, cold_s)
    diffs = report("warm store", warm, warm_s)
    worst = max((abs(d) for d in diffs), default=float("nan"))
    verdict = "within" if worst <= TARGET_PCT else "OUTSIDE"
    print(f"\nwarm: worst host {worst:.1f} % off, {verdict} the {TARGET_PCT:.0f} % target")


if __name__ == "__main__":
    main()
