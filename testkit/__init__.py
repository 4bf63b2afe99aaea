"""Helpers that tests and benchmark scripts share: real LoadGen runs of a tiny SUT, a judged run
store made from them, and where the official MLCommons checkouts are.

Over every package, imported by none of them (tests/test_layers.py), and not shipped in the wheel.
"""
