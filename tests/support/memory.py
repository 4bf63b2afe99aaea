"""How far this process's memory rose while something ran (peak RSS, sampled)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psutil

T = TypeVar("T")


def peak_growth(action: Callable[[], T]) -> tuple[int, T]:
    """Bytes the RSS rose above its start while action ran (sampled every 10 ms), and its result."""
    me = psutil.Process()
    start = me.memory_info().rss
    peak = start
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, me.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = action()
    finally:
        done.set()
        sampler.join()
    return max(peak, me.memory_info().rss) - start, result
