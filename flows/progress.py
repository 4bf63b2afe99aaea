"""Campaign progress, published as a Prefect progress artifact and to CLI listeners."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast
from uuid import UUID

from prefect.artifacts import create_progress_artifact, update_progress_artifact


@dataclass(frozen=True)
class Step:
    """One finished unit of work: a run (or a provisioning step) and how it ended."""

    label: str
    outcome: str  # "passed", "failed", "skipped", "reused", "waiting" (not finished yet),
    # "probe" (a tuning probe landed); a search ends "tuned", "kept" or "failed"
    done: int
    total: int
    counts: bool = True  # False: a line beside another bar's count (tuning within a campaign)


Listener = Callable[[Step], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Receive every Step (the CLI draws its progress bar from these)."""
    _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


class CampaignProgress:
    """Counts finished runs from any thread and mirrors the count in a progress artifact."""

    def __init__(self, total: int, description: str, *, key: str = "campaign-progress",
                 counts: bool = True) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.counts = counts
        self._lock = threading.Lock()
        created = create_progress_artifact(progress=0.0, key=key, description=description)
        self._artifact = cast(UUID, created)  # sync call site: the UUID, not a coroutine

    def waiting(self, label: str, why: str) -> None:
        """Tell listeners a run waits for a slot (an analyzer); waiting is normal, not failure."""
        self.note(f"{label}: {why}", "waiting")

    def note(self, label: str, outcome: str) -> None:
        """Tell listeners of something under way (a wait, a tuning probe) without counting it."""
        step = Step(label, outcome, self.done, self.total, self.counts)
        for listener in list(_listeners):
            listener(step)

    def finished(self, label: str, outcome: str) -> None:
        """Record one finished run."""
        with self._lock:
            self.done += 1
            step = Step(label, outcome, self.done, self.total, self.counts)
            if self._artifact is not None:
                update_progress_artifact(self._artifact, progress=100.0 * self.done / self.total)
        for listener in list(_listeners):
            listener(step)
