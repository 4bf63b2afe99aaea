"""The trained MLP answered by numpy alone: one relu hidden layer, then the argmax of the output.

The weights come from scikit-learn's fitted model (`coefs_`, `intercepts_`, `classes_`); training
also saves them as plain arrays beside the pickle (`digits-mlp.npz`), which a run loads without
importing scikit-learn (a second off every run's start). Predicting calls no scikit-learn code.
The operations are those of scikit-learn's own forward pass, in its dtype (float32: the model
was fitted on float32 samples), and the output's softmax is left out because it keeps the order
of the scores.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Network:
    """Weights of a one-hidden-layer relu MLP classifier."""

    hidden_w: np.ndarray
    hidden_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    classes: np.ndarray

    @classmethod
    def of(cls, model: Any) -> Network:
        """The weights of scikit-learn's fitted MLPClassifier."""
        if model.activation != "relu" or model.out_activation_ != "softmax" or model.n_layers_ != 3:
            raise ValueError(f"expected a relu MLP with one hidden layer and a softmax output, "
                             f"got {model.activation}/{model.out_activation_} with "
                             f"{model.n_layers_ - 2} hidden layers")
        (hidden_w, out_w), (hidden_b, out_b) = model.coefs_, model.intercepts_
        return cls(hidden_w, hidden_b, out_w, out_b, np.asarray(model.classes_))

    @classmethod
    def load(cls, path: Path) -> Network:
        """The network trained to path by digits_bench.train: from its arrays when they are
        there (no scikit-learn import), else from the pickle."""
        arrays = Path(path).with_suffix(".npz")
        if not arrays.exists():
            return cls.of(pickle.loads(Path(path).read_bytes()))
        with np.load(arrays) as saved:
            return cls(**{f.name: saved[f.name] for f in fields(cls)})

    @property
    def dtype(self) -> np.dtype:
        return self.hidden_w.dtype

    def save(self, path: Path) -> None:
        """The weights as plain arrays at path (.npz), for Network.load."""
        np.savez(path, **{f.name: getattr(self, f.name) for f in fields(self)})

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The class of each row of features, (n, 64) in the model's dtype."""
        hidden = features @ self.hidden_w
        hidden += self.hidden_b
        np.maximum(hidden, 0, out=hidden)
        scores = hidden @ self.out_w
        scores += self.out_b
        return self.classes[scores.argmax(axis=1)]
