"""Helpers that tests and benchmark scripts share: real LoadGen runs of a tiny SUT, a judged run
store made from them, where the official MLCommons checkouts are, and `FakeHost`, an in-memory
Host for tests of pure logic and fault injection (with a scripted docker CLI in `fake_docker`).

Over every package, imported by none of them (tests/test_layers.py), and not shipped in the wheel.
"""
