"""The product path in submission mode: the `subrun` CLI runs a campaign, the official checker
judges its tree.

    .venv/bin/python benchmarks/submission_mode.py [--short] [--host local] [--out DIR]

Writes a campaign of the digits benchmark in all four scenarios (open division, accuracy and
TEST01/TEST04, no power) for a host of the test lab (`scripts/testlab.py up`), runs
`subrun run` on it exactly as a user does (containers, the Prefect flow, settling, assembly),
then runs mlcommons/inference's submission checker (the pinned snapshot in
../shared/official/inference, or $SUBRUN_INFERENCE_REPO) on the tree. Prints the wall time, the
runs and attempts (re-runs, re-verifications) and the checker's summary.

Submission mode runs the round's durations: every performance and compliance run lasts at least
600 s, about two and a half hours for the four scenarios. `--short` runs the same path in short
mode (minutes), where the checker's only findings are the short durations.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.store import RunStore  # noqa: E402  (after the path is set)
from submission.checker import run_checker  # noqa: E402
from testkit.official import INFERENCE  # noqa: E402

LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))


def campaign_yaml(name: str, host: str, mode: str, out: Path) -> str:
    return "\n".join([
        f"name: {name}", "round: v6.1", "division: open", f"mode: {mode}",
        "accuracy: true", "compliance: true", "power: false", "max_reruns: 3",
        f"inventory: {LAB / 'hosts.yaml'}", f"output_dir: {out}",
        "hosts:", f"  - host: {host}", "    benchmarks:", "      - benchmark: digits",
        "        scenarios: [SingleStream, MultiStream, Offline, Server]", ""])


def attempts_table(store: RunStore) -> tuple[int, int, int, list[str]]:
    """Runs, measured re-runs, re-verifications, and a line per run."""
    runs = reruns = reverified = 0
    lines = []
    keys = store.keys()
    for key in keys:
        attempts = store.attempts(key)
        measured = [a for a in attempts if a.reverifies is None]
        runs += 1
        reruns += len(measured) - 1
        reverified += len(attempts) - len(measured)
        standing = store.standing(key)
        lines.append(f"  {attempts[0].spec.label:<44} attempts {len(attempts)} "
                     f"(re-verified {len(attempts) - len(measured)}), "
                     f"standing: {standing.attempt if standing else 'none'}")
    return runs, reruns, reverified, sorted(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="short mode: minutes, not hours")
    parser.add_argument("--host", default="local", help="the lab host to run on")
    parser.add_argument("--out", type=Path, default=Path("/var/tmp/subrun-submission-mode"))
    args = parser.parse_args()
    if INFERENCE is None:
        print("No mlcommons/inference checkout: set SUBRUN_INFERENCE_REPO.", file=sys.stderr)
        return 2
    mode = "short" if args.short else "submission"
    name = f"digits-{mode}"
    args.out.mkdir(parents=True, exist_ok=True)
    campaign = args.out / f"{name}.yaml"
    campaign.write_text(campaign_yaml(name, args.host, mode, args.out))
    started = time.monotonic()
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "subrun"), "run", str(campaign)],
                          check=False)
    wall = time.monotonic() - started
    runs, reruns, reverified, lines = attempts_table(RunStore(args.out / name / "store"))
    tree = args.out / name / "submission"
    print(f"\ncampaign {name} on host '{args.host}': subrun exited {done.returncode} "
          f"after {wall / 60:.1f} min")
    print(f"runs {runs}, re-runs {reruns}, re-verified test logs {reverified}")
    print("\n".join(lines))
    if not tree.is_dir():
        print("no submission tree was assembled")
        return 1
    outcome = run_checker(tree, INFERENCE, "v6.1", work_dir=args.out / name / "checker")
    print(f"official checker: {outcome.summary} "
          f"({', '.join(f'{k}={v}' for k, v in outcome.counts.items())})")
    for error in outcome.errors[:20]:
        print(f"  {error.message}")
    return 0 if done.returncode == 0 and outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
