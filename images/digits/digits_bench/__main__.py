"""Run one LoadGen test of the digits benchmark (argv: see mlperf_harness.parse_args)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from mlperf_harness import main

from digits_bench import data
from digits_bench.network import Network

MODEL = Path("/opt/model/digits-mlp.pkl")


class DigitsBackend:
    """The digits samples, computed and normalized on load, and the MLP answering them."""

    total_count = data.TOTAL_COUNT
    performance_count = data.PERFORMANCE_COUNT

    def __init__(self, model_path: Path) -> None:
        data.prefer(model_path.parent / data.IMAGES)
        self.network = Network.load(model_path)
        # every sample's row, filled on load: 50,000 x 64 float32 is 12.8 MB, and a query then
        # gathers its rows in one indexing step
        self.features = np.zeros((self.total_count, 64), dtype=self.network.dtype)

    def load(self, indices: Sequence[int]) -> None:
        rows = list(indices)
        self.features[rows] = data.normalize(data.samples(rows))

    def unload(self, indices: Sequence[int]) -> None:
        """Nothing to free: the rows stay in the array made at start."""

    def predict(self, indices: Sequence[int]) -> np.ndarray:
        return self.network.predict(self.features[indices])


def make_backend(args: argparse.Namespace) -> DigitsBackend:
    model_path = Path(args.model_dir) / MODEL.name if args.model_dir else MODEL
    return DigitsBackend(model_path)


if __name__ == "__main__":
    sys.exit(main(make_backend))
