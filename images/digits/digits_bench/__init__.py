"""Handwritten digits through LoadGen: scikit-learn's digits, a small MLP, 50,000 samples."""

import os

# One BLAS thread, set before numpy loads (`python -m digits_bench[.train]` imports this package
# first): the harness gets its parallelism from one worker per core, a 20-us query has nothing
# to share out, and training then gives the same bytes on every machine with the same kernels.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"
