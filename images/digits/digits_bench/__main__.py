"""Run one LoadGen test of the digits benchmark (argv: see mlperf_harness.parse_args)."""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from mlperf_harness import main

from digits_bench import data

MODEL = Path("/opt/model/digits-svc.pkl")


class DigitsBackend:
    """The digits samples, computed on load, and the SVM answering them."""

    total_count = data.TOTAL_COUNT
    performance_count = data.PERFORMANCE_COUNT

    def __init__(self, model_path: Path) -> None:
        self.model = pickle.loads(model_path.read_bytes())
        self.loaded: dict[int, np.ndarray] = {}

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded[i] = data.sample(i)

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)

    def predict(self, indices: Sequence[int]) -> np.ndarray:
        batch = np.stack([self.loaded[i] for i in indices])
        return self.model.predict(data.normalize(batch))


def make_backend(args: argparse.Namespace) -> DigitsBackend:
    model_path = Path(args.model_dir) / MODEL.name if args.model_dir else MODEL
    return DigitsBackend(model_path)


if __name__ == "__main__":
    sys.exit(main(make_backend))
