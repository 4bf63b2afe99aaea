"""Score a digits accuracy run into accuracy.txt (the resnet reference format plus hash=)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlperf_harness.accuracy import write_accuracy_txt

from digits_bench import data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log", required=True, type=Path, help="mlperf_log_accuracy.json")
    parser.add_argument("--out", required=True, type=Path, help="accuracy.txt to write")
    args = parser.parse_args()
    data.prefer(Path("/opt/model") / data.IMAGES)  # the image's copy, when there is one
    print(write_accuracy_txt(args.log, args.out, data.label), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
