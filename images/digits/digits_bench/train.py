"""Train the digits model at image build time: deterministic, a few seconds on one core.

The fitted weights depend on the order in which floating-point sums are done, and so on the SIMD
kernels OpenBLAS and numpy pick for the CPU at hand (an AVX-512 machine and an AVX2 one give
different bytes). On x86-64 both are pinned to the baseline every such CPU has, before numpy
loads, so every machine gives the same model: run this as `python -m digits_bench.train`.
"""

from __future__ import annotations

import os
import platform

# numpy and OpenBLAS read these when they load: set before the imports below
if platform.machine().lower() in {"x86_64", "amd64"}:
    os.environ["OPENBLAS_CORETYPE"] = "Prescott"
    os.environ["NPY_DISABLE_CPU_FEATURES"] = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"

import hashlib
import pickle
import sys
import warnings
from pathlib import Path

from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from digits_bench import data
from digits_bench.network import Network

MAX_ITER = 100  # epochs; a fixed count, so the fit ends at the same step everywhere


def make_model() -> MLPClassifier:
    """The untrained network: 64 relu units, seeded; alpha=1 (L2) generalizes best to the
    shifted and dimmed evaluation samples (93.7 % against about 92 % at the default 1e-4)."""
    return MLPClassifier(hidden_layer_sizes=(64,), alpha=1.0, max_iter=MAX_ITER, random_state=0)


def train(out: Path) -> str:
    """Fit the MLP on the shifted training half, pickle it to out, return its sha256. The
    weights as arrays and the source images go beside it (.npz), for runs that start fast."""
    x, y = data.training_set()
    model = make_model()
    # one BLAS thread even when numpy was loaded first: the sums run in one order everywhere
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # MAX_ITER ends it, by design
        model.fit(x, y)
    blob = pickle.dumps(model, protocol=5)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()
    out.with_suffix(".sha256").write_text(f"{digest}  {out.name}\n")
    Network.of(model).save(out.with_suffix(".npz"))
    data.save_images(out.parent / data.IMAGES)
    return digest


if __name__ == "__main__":
    print(train(Path(sys.argv[1])))
