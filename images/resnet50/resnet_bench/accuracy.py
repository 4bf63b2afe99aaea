"""Score a ResNet50 accuracy run against val_map.txt into accuracy.txt (reference format)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlperf_harness.accuracy import write_accuracy_txt

from resnet_bench import imagenet


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", required=True, type=Path, help="mlperf_log_accuracy.json")
    parser.add_argument("--dataset-dir", required=True, type=Path, help="holds val_map.txt")
    parser.add_argument("--out", required=True, type=Path, help="accuracy.txt to write")
    args = parser.parse_args()
    labels = [label for _, label in imagenet.read_val_map(args.dataset_dir)]
    print(write_accuracy_txt(args.log, args.out, labels.__getitem__), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
