"""Idempotent steps through a flaky link: a command cut by a dropped link (ConnectionLost) may
or may not have run on the target, so nothing re-sends it blindly; a step that is safe to
repeat (it only reads, or its effect is the same twice) is called again instead, and the next
command reconnects within the host's outage budget. A link that stays down (LinkDown,
HostUnreachable) is not a cut: it propagates to the caller."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from lab.errors import ConnectionLost

MAX_CUTS = 20  # cuts one idempotent step absorbs; the host's outage budget bounds a long outage
T = TypeVar("T")
log = logging.getLogger("subrun.cuts")


def through_cuts(step: Callable[[], T], tries: int = MAX_CUTS + 1) -> T:
    """step(), called again (at most tries times in all) while a cut link interrupts it."""
    for _ in range(tries - 1):
        try:
            return step()
        except ConnectionLost as e:
            log.warning("%s Doing it again.", e)
    return step()
