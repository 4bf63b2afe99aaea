"""Run one LoadGen test of ResNet50 (argv: see mlperf_harness.parse_args)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from mlperf_harness import main

from resnet_bench import imagenet
from resnet_bench.model import LABEL_OFFSET, MODEL_FILE, OUTPUT

PERFORMANCE_COUNT = 1024  # resnet's performance-sample-count


class ResnetBackend:
    """Images from val_map.txt, preprocessed on load; onnxruntime answers."""

    def __init__(self, dataset_dir: Path, model_path: Path, threads: int) -> None:
        self.dataset_dir = dataset_dir
        self.entries = imagenet.read_val_map(dataset_dir)
        self.total_count = len(self.entries)
        self.performance_count = min(PERFORMANCE_COUNT, self.total_count)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(model_path), options,
                                            providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name
        self.loaded: dict[int, np.ndarray] = {}

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self.loaded:
                self.loaded[i] = imagenet.preprocess(self.dataset_dir / self.entries[i][0])

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.loaded.pop(i, None)

    def predict(self, indices: Sequence[int]) -> np.ndarray:
        batch = np.stack([self.loaded[i] for i in indices])
        (classes,) = self.session.run([OUTPUT], {self.input: batch})
        return np.asarray(classes).reshape(-1) + LABEL_OFFSET


def make_backend(args: argparse.Namespace) -> ResnetBackend:
    # One worker thread per batch; onnxruntime spreads each batch over the cores.
    threads, args.threads = args.threads, 1
    return ResnetBackend(Path(args.dataset_dir), Path(args.model_dir) / MODEL_FILE, threads)


if __name__ == "__main__":
    sys.exit(main(make_backend))
