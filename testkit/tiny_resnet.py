"""A stand-in for resnet50_v1.onnx and ImageNet, small enough for tests, same signature.

The model maps `input_tensor:0` [N, 3, 224, 224] to `softmax_tensor:0` [N, 1001] and `ArgMax:0`
[N]: a 7x7 stride-2 stem convolution like resnet's (16 channels; the first three are box filters
of the colour channels, the rest random and unscored) makes it compute-bound like the real model,
so TEST04's repeated sample is not faster from the CPU cache alone (a pooling-only model ran it
65 % faster); it averages each stem channel and scores class 1 + c by channel c, so after the
reference preprocessing (means subtracted) a mostly red, green or blue picture is class 1, 2 or
3, i.e. ImageNet label 0, 1 or 2. The dataset is JPEGs of those colours in several sizes, with
val_map.txt; every `wrong_every`-th entry carries a wrong label, so the accuracy is known.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

CLASSES = 1001
STEM_CHANNELS = 16
COLOURS = ((230, 30, 20), (25, 220, 40), (20, 35, 235))
SIZES = ((320, 240), (240, 320), (500, 375), (224, 224), (300, 300), (180, 260))


def write_model(path: Path) -> str:
    """Write the tiny model to path; return its md5 (the manifest's checksum form)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.zeros((STEM_CHANNELS, CLASSES), dtype=np.float32)
    stem = np.random.RandomState(7).standard_normal((STEM_CHANNELS, 3, 7, 7)).astype(np.float32)
    for channel in range(3):
        weights[channel, 1 + channel] = 1.0
        stem[channel] = 0.0
        stem[channel, channel] = 1.0 / 49
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input_tensor:0", "stem"], ["stemmed"], kernel_shape=[7, 7],
                          strides=[2, 2], pads=[3, 3, 3, 3]),
         helper.make_node("GlobalAveragePool", ["stemmed"], ["pooled"]),
         helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
         helper.make_node("Gemm", ["flat", "weights", "bias"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["softmax_tensor:0"], axis=1),
         helper.make_node("ArgMax", ["logits"], ["ArgMax:0"], axis=1, keepdims=0)],
        "tiny_resnet50_signature",
        [helper.make_tensor_value_info("input_tensor:0", TensorProto.FLOAT,
                                       ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("ArgMax:0", TensorProto.INT64, ["batch"]),
         helper.make_tensor_value_info("softmax_tensor:0", TensorProto.FLOAT,
                                       ["batch", CLASSES])],
        [numpy_helper.from_array(stem, "stem"), numpy_helper.from_array(weights, "weights"),
         numpy_helper.from_array(np.zeros(CLASSES, dtype=np.float32), "bias")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return hashlib.md5(path.read_bytes()).hexdigest()


def write_dataset(folder: Path, count: int = 48, wrong_every: int = 4) -> int:
    """JPEGs plus val_map.txt in folder; return how many entries are labelled correctly."""
    from PIL import Image

    rng = random.Random(7)
    folder.mkdir(parents=True, exist_ok=True)
    lines, right = [], 0
    for i in range(count):
        colour = i % 3
        width, height = SIZES[i % len(SIZES)]
        base = COLOURS[colour]
        image = Image.new("RGB", (width, height), base)
        pixels = image.load()
        assert pixels is not None  # a new in-memory image always has pixels
        for _ in range(200):  # some noise, so decoding and resizing have work to do
            x, y = rng.randrange(width), rng.randrange(height)
            pixels[x, y] = tuple(min(255, max(0, c + rng.randint(-40, 40))) for c in base)
        name = f"ILSVRC2012_val_{i + 1:08d}.JPEG"
        image.save(folder / name, "JPEG", quality=90)
        wrong = (i + 1) % wrong_every == 0
        lines.append(f"{name} {(colour + 1) % 3 if wrong else colour}")
        right += not wrong
    (folder / "val_map.txt").write_text("\n".join(lines) + "\n")
    return right
