"""Reusable pieces for tests that drive real parts (LoadGen runs, ...)."""
