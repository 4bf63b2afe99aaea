"""The digits model as the image trains it: the same bytes from every training, and the numpy
forward pass that serves it agreeing with scikit-learn on all 50,000 evaluation samples."""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

DIGITS = Path(__file__).resolve().parent.parent / "images" / "digits"


def train(out: Path, **env: str) -> str:
    """Train as the Dockerfile does (a fresh interpreter); returns the printed sha256."""
    environment = {**os.environ, "PYTHONPATH": str(DIGITS), **env}
    done = subprocess.run([sys.executable, "-m", "digits_bench.train", str(out)], env=environment,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    """digits_bench's data and network modules, imported here without leaving its BLAS settings
    in this process's environment."""
    saved = dict(os.environ)
    sys.path.insert(0, str(DIGITS))
    try:
        yield {name: importlib.import_module(f"digits_bench.{name}")
               for name in ("data", "network")}
    finally:
        sys.path.remove(str(DIGITS))
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "digits-mlp.pkl"
    digest = train(path)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.with_suffix(".sha256").read_text() == f"{digest}  digits-mlp.pkl\n"
    return path


def test_training_gives_the_same_bytes_whatever_the_blas_kernels(model_path: Path,
                                                                 tmp_path: Path) -> None:
    # another OpenBLAS kernel and thread count asked for: train.py pins both before numpy loads
    again = train(tmp_path / "again.pkl", OPENBLAS_CORETYPE="SkylakeX", OPENBLAS_NUM_THREADS="2")
    assert again == hashlib.sha256(model_path.read_bytes()).hexdigest()


def test_numpy_forward_pass_equals_sklearn_on_every_sample(
        bench: dict[str, ModuleType], model_path: Path) -> None:
    data, network = bench["data"], bench["network"]
    model = pickle.loads(model_path.read_bytes())
    net = network.Network.of(model)
    assert net.dtype == np.float32  # what benchmark.yaml declares: weight_data_types fp32
    indices = list(range(data.TOTAL_COUNT))
    features = data.normalize(data.samples(indices))
    ours = net.predict(features)
    assert np.array_equal(ours, model.predict(features))
    singles = np.concatenate([net.predict(features[i:i + 1]) for i in range(0, 50_000, 97)])
    assert np.array_equal(singles, ours[::97])  # one sample at a time, as SingleStream asks
    labels = np.array([data.label(i) for i in indices])
    accuracy = float(np.mean(ours == labels))
    assert accuracy > 0.9, accuracy


def test_a_run_loads_the_saved_arrays_without_scikit_learn(
        bench: dict[str, ModuleType], model_path: Path) -> None:
    """What training saves beside the pickle gives the same network and the same samples, and
    loading them imports no scikit-learn (that import was a second of every run's start)."""
    data, network = bench["data"], bench["network"]
    from_pickle = network.Network.of(pickle.loads(model_path.read_bytes()))
    indices = list(range(0, data.TOTAL_COUNT, 7))
    expected = data.normalize(data.samples(indices))
    probe = ("import sys; from pathlib import Path; from digits_bench import data; "
             "from digits_bench.network import Network; "
             f"data.prefer(Path({str(model_path.parent / data.IMAGES)!r})); "
             f"net = Network.load(Path({str(model_path)!r})); "
             "import numpy as np; "
             f"x = data.normalize(data.samples(list(range(0, {data.TOTAL_COUNT}, 7)))); "
             "np.save(sys.argv[1], np.stack([x.sum(axis=1), net.predict(x).astype(x.dtype)])); "
             "print(any(m.startswith('sklearn') for m in sys.modules))")
    out = model_path.parent / "probe.npy"
    done = subprocess.run([sys.executable, "-c", probe, str(out)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{DIGITS}"}, check=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    sums, labels = np.load(out)
    assert np.array_equal(sums, expected.sum(axis=1))
    assert np.array_equal(labels, from_pickle.predict(expected).astype(expected.dtype))
