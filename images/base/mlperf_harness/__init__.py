"""The LoadGen side every subrun benchmark image shares: arguments, SUT, QSL, logs.

A benchmark supplies a `Backend` (its dataset and model); `main(make_backend)` parses the
standard arguments, builds LoadGen's SUT and QSL around the backend and runs one test. The
working directory is the run directory holding user.conf (and audit.config for compliance runs,
which LoadGen finds there by itself); LoadGen's logs go to --output-dir.
"""

from mlperf_harness.harness import Backend, main

__all__ = ["Backend", "main"]
