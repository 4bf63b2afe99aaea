"""Check the mounted dataset and model before any run: complete, readable, the right shape."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnxruntime as ort

from resnet_bench import imagenet
from resnet_bench.model import EXPECTED_INPUT, MODEL_FILE, OUTPUT


def problems(dataset_dir: Path, model_dir: Path, full_size: int | None) -> list[str]:
    """What is wrong with the dataset and model (empty when they are fit to run)."""
    found: list[str] = []
    try:
        entries = imagenet.read_val_map(dataset_dir)
    except (OSError, ValueError) as e:
        return [f"cannot read {dataset_dir / imagenet.VAL_MAP}: {e}"]
    missing = [name for name, _ in entries if not (dataset_dir / name).is_file()]
    if missing:
        found.append(f"{len(missing)} of {len(entries)} images listed in val_map.txt are "
                     f"missing under {dataset_dir}, e.g. {missing[0]}")
    bad = [label for _, label in entries if not 0 <= label < 1000]
    if bad:
        found.append(f"{len(bad)} labels are outside 0..999, e.g. {bad[0]}")
    if full_size is not None and len(entries) != full_size:
        found.append(f"val_map.txt lists {len(entries)} images, not {full_size}")
    if entries and not missing:
        imagenet.preprocess(dataset_dir / entries[0][0])  # decodes; raises on a broken file
    try:
        session = ort.InferenceSession(str(model_dir / MODEL_FILE),
                                       providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        return [*found, f"cannot load {model_dir / MODEL_FILE}: {e}"]
    shape = session.get_inputs()[0].shape
    if [int(d) if isinstance(d, int) else d for d in shape[1:]] != EXPECTED_INPUT:
        found.append(f"model input is {shape}, expected [batch, 3, 224, 224]")
    if OUTPUT not in [o.name for o in session.get_outputs()]:
        found.append(f"model has no output {OUTPUT}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset-dir", required=True, type=Path)
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--full-size", type=int, default=None,
                        help="require exactly this many images (50000 for a submission)")
    args = parser.parse_args()
    found = problems(args.dataset_dir, args.model_dir, args.full_size)
    for problem in found:
        print(f"verify: {problem}", file=sys.stderr)
    if not found:
        print(f"verify: dataset and model OK ({args.dataset_dir}, {args.model_dir})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
