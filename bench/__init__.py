"""Benchmarks: manifests, run specs, LoadGen settings and logs, verdicts, the run store."""
