"""The dataset: scikit-learn's 8x8 digits, the held-out half grown to 50,000 samples.

The first 898 images train the model; the other 899 are the evaluation images. Sample i is
evaluation image i % 899 under variant i // 899: a one-pixel shift (9 choices, none first) and an
intensity gain (7 choices, 1.0 first). 56 variants x 899 images cover the 50,000 samples the
checker demands of an accuracy run for the resnet benchmark this one maps to. Everything is a pure
function of the index, so every run, host and the accuracy script agree on every sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

TRAIN_COUNT = 898
TOTAL_COUNT = 50_000
PERFORMANCE_COUNT = 1024  # resnet's performance-sample-count
SHIFTS = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1))
GAINS = (1.0, 0.85, 1.15, 0.7, 1.3, 0.925, 1.075)


IMAGES = "digits-images.npz"  # beside the model: the source images, saved at training time
_saved: list[Path] = []


def prefer(path: Path) -> None:
    """Read the source images from path (written by save_images) instead of importing
    scikit-learn's copy, when path exists: a second off a run's start."""
    if path.exists():
        _saved[:] = [path]
        digits.cache_clear()


def save_images(path: Path) -> None:
    images, labels = digits()
    np.savez(path, images=images, labels=labels)


@lru_cache(maxsize=1)
def digits() -> tuple[np.ndarray, np.ndarray]:
    """All 1,797 images as (n, 8, 8) float32 in [0, 16], and their labels."""
    if _saved:
        with np.load(_saved[0]) as saved:
            return saved["images"], saved["labels"]
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images.astype(np.float32), bunch.target.astype(np.int64)


def augment(image: np.ndarray, variant: int) -> np.ndarray:
    """Image under one variant: shifted by whole pixels (zeros enter), scaled, clipped."""
    dx, dy = SHIFTS[variant % len(SHIFTS)]
    gain = GAINS[(variant // len(SHIFTS)) % len(GAINS)]
    shifted = np.zeros_like(image)
    src = image[max(0, -dy):8 - max(0, dy), max(0, -dx):8 - max(0, dx)]
    shifted[max(0, dy):max(0, dy) + src.shape[0], max(0, dx):max(0, dx) + src.shape[1]] = src
    return np.clip(shifted * gain, 0.0, 16.0)


def eval_count() -> int:
    return len(digits()[1]) - TRAIN_COUNT


def sample(index: int) -> np.ndarray:
    """The 64 features of evaluation sample index."""
    images, _ = digits()
    base, variant = TRAIN_COUNT + index % eval_count(), index // eval_count()
    return augment(images[base], variant).reshape(64)


def label(index: int) -> int:
    """The true digit of evaluation sample index."""
    return int(digits()[1][TRAIN_COUNT + index % eval_count()])


def samples(indices: Sequence[int]) -> np.ndarray:
    return np.stack([sample(i) for i in indices])


def normalize(batch: np.ndarray) -> np.ndarray:
    """The model's input: each sample scaled so its brightest pixel is 16 (gain drops out)."""
    peak = np.maximum(batch.max(axis=1, keepdims=True), 1e-6)
    return batch * (16.0 / peak)


def training_set() -> tuple[np.ndarray, np.ndarray]:
    """The training images under every shift, normalized (deterministic)."""
    images, labels = digits()
    xs = [augment(img, v).reshape(64) for v in range(len(SHIFTS)) for img in images[:TRAIN_COUNT]]
    return normalize(np.stack(xs)), np.concatenate([labels[:TRAIN_COUNT]] * len(SHIFTS))
