"""Real runs of the ctr-mini demo training harness on this machine, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "images" / "ctr-mini"


def train(out: Path, seed: int, target: float = 0.872, epochs: int = 12) -> Path:
    """One real run of the demo harness (seconds on one core); its mllog file."""
    env = {**os.environ, "PYTHONPATH": str(DEMO)}
    subprocess.run([sys.executable, "-m", "ctr_bench.train", "--seed", str(seed),
                    "--output-dir", str(out), "--target", str(target), "--submitter", "Acme",
                    "--system", "h2", "--max-epochs", str(epochs)],
                   check=True, env=env, capture_output=True, timeout=120)
    return out / "result.txt"
