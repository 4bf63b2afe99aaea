"""The product path in submission mode: the `subrun` CLI runs a campaign, the official checker
judges its tree.

    .venv/bin/python benchmarks/submission_mode.py [--benchmark digits|resnet50] [--short]
                                                   [--host local] [--out DIR]

Writes a campaign for a host of the test lab (`scripts/testlab.py up`), runs `subrun run` on it
exactly as a user does (containers, the Prefect flow, settling, assembly), then runs
mlcommons/inference's submission checker (the pinned snapshot in ../shared/official/inference,
or $SUBRUN_INFERENCE_REPO) on the tree. Prints the wall time, the runs and attempts (re-runs,
re-verifications) and the checker's summary.

- `digits`: the open-division demo benchmark in all four scenarios (accuracy, TEST01/TEST04, no
  power). The checker must say the submission looks OK.
- `resnet50`: the closed-division reference flow in the edge scenarios, on a generated stand-in
  for resnet50_v1.onnx and a 50,000-image stand-in for ImageNet (testkit.tiny_resnet), mounted
  on the host; the benchmark folder is a copy of images/ whose model checksum is the stand-in's
  (read through $SUBRUN_IMAGES_DIR). Every check must pass except accuracy, which the checker
  must name as the only error.

Submission mode runs the round's durations: every performance and compliance run lasts at least
600 s, about two and a half hours for digits' four scenarios and two for resnet50's three.
`--short` runs the same path in short mode (minutes), where the checker also names the short
durations.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.store import RunStore  # noqa: E402  (after the path is set)
from submission.checker import run_checker  # noqa: E402
from testkit import tiny_resnet  # noqa: E402
from testkit.official import INFERENCE  # noqa: E402

LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
SCENARIOS = {"digits": "[SingleStream, MultiStream, Offline, Server]",
             "resnet50": "[SingleStream, MultiStream, Offline]"}
DIVISION = {"digits": "open", "resnet50": "closed"}
RESNET_MD5 = "md5:f6a4da60cd5f084d97efc2c1ddb10beb"  # images/resnet50/benchmark.yaml's model


def campaign_yaml(name: str, benchmark: str, host: str, mode: str, inventory: Path,
                  out: Path) -> str:
    return "\n".join([
        f"name: {name}", "round: v6.1", f"division: {DIVISION[benchmark]}", f"mode: {mode}",
        "accuracy: true", "compliance: true", "power: false", "max_reruns: 3",
        f"inventory: {inventory}", f"output_dir: {out}",
        f"accuracy_misses_in_tree: {'true' if benchmark == 'resnet50' else 'false'}",
        "hosts:", f"  - host: {host}", "    benchmarks:", f"      - benchmark: {benchmark}",
        f"        scenarios: {SCENARIOS[benchmark]}", ""])


def resnet_standin(host: str, out: Path) -> tuple[Path, dict[str, str]]:
    """The stand-in model and dataset mounted on the host (an inventory beside out), and the
    environment that reads benchmarks from a copy of images/ holding the stand-in's checksum."""
    data = out / "resnet-standin"
    if not (data / "imagenet" / "val_map.txt").is_file():
        print("writing the 50,000-image stand-in dataset (a few minutes, once)", flush=True)
        tiny_resnet.write_dataset(data / "imagenet", count=50000)
    md5 = tiny_resnet.write_model(data / "model" / "resnet50_v1.onnx")
    images = out / "images"
    shutil.rmtree(images, ignore_errors=True)
    shutil.copytree(ROOT / "images", images)
    manifest = images / "resnet50" / "benchmark.yaml"
    manifest.write_text(manifest.read_text().replace(RESNET_MD5, f"md5:{md5}"))
    inventory = yaml.safe_load((LAB / "hosts.yaml").read_text())
    entry = next(h for h in inventory["hosts"] if h["name"] == host)
    entry.setdefault("docker", {})["mounts"] = [
        {"source": str(data / "imagenet"), "target": "/subrun/data/imagenet"},
        {"source": str(data / "model"), "target": "/subrun/models/resnet50"}]
    path = out / "hosts.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path, {"SUBRUN_IMAGES_DIR": str(images)}


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
    parser.add_argument("--benchmark", choices=sorted(SCENARIOS), default="digits")
    parser.add_argument("--short", action="store_true", help="short mode: minutes, not hours")
    parser.add_argument("--host", default="local", help="the lab host to run on")
    parser.add_argument("--out", type=Path, default=Path("/var/tmp/subrun-submission-mode"))
    args = parser.parse_args()
    if INFERENCE is None:
        print("No mlcommons/inference checkout: set SUBRUN_INFERENCE_REPO.", file=sys.stderr)
        return 2
    mode = "short" if args.short else "submission"
    name = f"{args.benchmark}-{mode}"
    args.out.mkdir(parents=True, exist_ok=True)
    inventory, env = LAB / "hosts.yaml", dict[str, str]()
    if args.benchmark == "resnet50":
        inventory, env = resnet_standin(args.host, args.out)
    campaign = args.out / f"{name}.yaml"
    campaign.write_text(campaign_yaml(name, args.benchmark, args.host, mode, inventory,
                                      args.out))
    started = time.monotonic()
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "subrun"), "run", str(campaign)],
                          env={**os.environ, **env}, check=False)
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
    if args.benchmark == "resnet50":  # the stand-in's accuracy is the one expected error
        others = [e for e in outcome.errors if "accuracy" not in e.message.lower()]
        print(f"errors other than accuracy: {len(others)}")
        return 0 if outcome.errors and not others else 1
    return 0 if done.returncode == 0 and outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
