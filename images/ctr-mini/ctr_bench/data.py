"""The generated click log: dense and categorical features, clicks from a hidden logistic model.

The data set is fixed (data seed 0, as DLRM's preprocessing shuffles once with a fixed seed);
a run's own seed only decides the model's initial weights and the order of its batches.
"""

from __future__ import annotations

import numpy as np

DENSE = 13  # like Criteo's integer features
CATEGORICAL = 8
CARDINALITY = 40  # values per categorical feature
TRAIN_SAMPLES = 120_000
EVAL_SAMPLES = 20_000
DATA_SEED = 0


def features(rng: np.random.Generator, n: int) -> np.ndarray:
    """n rows: dense features, then one one-hot block per categorical feature."""
    dense = rng.standard_normal((n, DENSE)).astype(np.float32)
    cats = rng.integers(0, CARDINALITY, size=(n, CATEGORICAL))
    onehot = np.zeros((n, CATEGORICAL * CARDINALITY), dtype=np.float32)
    onehot[np.arange(n)[:, None], cats + np.arange(CATEGORICAL) * CARDINALITY] = 1.0
    return np.hstack([dense, onehot])


def click_log() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train_x, train_y, eval_x, eval_y), the same on every call and every machine."""
    rng = np.random.default_rng(DATA_SEED)
    x = features(rng, TRAIN_SAMPLES + EVAL_SAMPLES)
    hidden = rng.standard_normal(x.shape[1]).astype(np.float32) * 0.9
    logits = x @ hidden - 0.5
    y = (rng.random(len(x)) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
    return x[:TRAIN_SAMPLES], y[:TRAIN_SAMPLES], x[TRAIN_SAMPLES:], y[TRAIN_SAMPLES:]
