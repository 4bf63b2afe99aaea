"""ImageNet validation as the reference reads it: val_map.txt, and the VGG-style preprocessing.

Each image is converted to RGB, resized with area averaging so that its shorter side becomes
256 (224 / 0.875, the aspect ratio kept), centre-cropped to 224 x 224, given the per-channel
means subtracted, and laid out as CHW float32: what resnet50_v1.onnx expects at input_tensor:0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

SIZE = 224
SCALE = 0.875
MEANS = np.array([123.68, 116.78, 103.94], dtype=np.float32)
VAL_MAP = "val_map.txt"


def read_val_map(dataset_dir: Path) -> list[tuple[str, int]]:
    """(file name, label) for every line of val_map.txt, in order: the QSL's sample order."""
    entries = []
    for number, line in enumerate((Path(dataset_dir) / VAL_MAP).read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise ValueError(f"{VAL_MAP} line {number}: expected '<file> <label>', got {line!r}")
        entries.append((parts[0], int(parts[1])))
    return entries


def resized(image: Image.Image) -> Image.Image:
    """Shorter side to SIZE / SCALE, aspect ratio kept (the reference's resize_with_aspectratio)."""
    width, height = image.size
    short = int(SIZE / SCALE)
    if height > width:
        new_width, new_height = short, int(short * height / width)
    else:
        new_width, new_height = int(short * width / height), short
    return image.resize((new_width, new_height), Image.Resampling.BOX)


def preprocess(path: Path) -> np.ndarray:
    """One image file as the model's (3, 224, 224) float32 input."""
    with Image.open(path) as raw:
        image = resized(raw.convert("RGB"))
    width, height = image.size
    left, top = int((width - SIZE) / 2), int((height - SIZE) / 2)
    pixels = np.asarray(image.crop((left, top, left + SIZE, top + SIZE)), dtype=np.float32)
    return (pixels - MEANS).transpose(2, 0, 1).copy()
