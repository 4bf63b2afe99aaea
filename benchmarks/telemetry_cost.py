"""The telemetry sampler's own CPU cost on this machine: print CPU milliseconds per sample and
the share of one core, for a container-style run (cgroup) and a native-style run (session).

    .venv/bin/python benchmarks/telemetry_cost.py [--seconds 30]

Each mode samples beside a sleeping process for the given number of samples (1 Hz); the
sampler reports its own CPU time, children (`sleep`, `awk`) included, as its trace's last line.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import sampler  # noqa: E402  (after the path is set)
from bench.trace import read_trace  # noqa: E402
from bench.trace_judge import summarize  # noqa: E402


def cost(mode: str, seconds: int, work: Path) -> tuple[int, float]:
    """(samples, the sampler's CPU seconds) of one sampler beside a sleeping process."""
    trace = work / f"{mode}.jsonl"
    sleeper = subprocess.Popen(["sleep", str(seconds + 5)], start_new_session=True)
    try:
        subprocess.run(["sh", "-c", sampler.SCRIPT, "sh", str(trace), str(sleeper.pid), mode,
                        str(seconds)], check=True, timeout=seconds * 3 + 30)
    finally:
        sleeper.kill()
        sleeper.wait()
    summary = summarize(read_trace(trace))
    return summary.samples, summary.sampler_cpu_s or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="subrun-telemetry-cost-") as tmp:
        for mode in ("cgroup", "session"):
            samples, cpu_s = cost(mode, args.seconds, Path(tmp))
            per = 1000 * cpu_s / max(samples, 1)
            print(f"{mode:8} {samples} samples, {cpu_s:.2f} s CPU: {per:.1f} ms per sample, "
                  f"{per / 10:.2f} % of one core at 1 Hz")


if __name__ == "__main__":
    main()
