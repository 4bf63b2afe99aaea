"""Telling a live link from a dead one, and how long a host has been out of reach.

A silent partition (packets dropped, no reset) leaves a TCP connection looking open: a command
waiting on it would hang until its own timeout, which for a benchmark run is many minutes. So a
`Watchdog` asks the peer for an answer every few seconds (an SSH request that wants a reply, as
OpenSSH's ServerAliveInterval does) and declares the link dead when none comes within a
deadline; the transport then closes, and whatever waited on it fails at once as a lost link.

An `Outage` is the time a host stays out of reach, counted once from the first fault however
many commands the outage cuts, and ended by the next successful connection. Its budget
(`outage_budget_s` in hosts.yaml) is minutes, not attempts: a flaky link costs time, and only
a host gone for the whole budget is given up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

PROBE_INTERVAL_S = 5.0  # ask for an answer this often
ANSWER_DEADLINE_S = 10.0  # no answer within this: the link is dead (detected within ~15 s)


class Watchdog:
    """Probe a link every interval in a daemon thread; call on_dead once when a probe goes
    unanswered past the deadline. `probe` blocks until the peer answers (or the link closes)."""

    def __init__(self, probe: Callable[[], object], alive: Callable[[], bool],
                 on_dead: Callable[[], None], *, interval_s: float = PROBE_INTERVAL_S,
                 deadline_s: float = ANSWER_DEADLINE_S, name: str = "link") -> None:
        self._probe, self._alive, self._on_dead = probe, alive, on_dead
        self.interval_s, self.deadline_s = interval_s, deadline_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"watchdog-{name}", daemon=True)

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(self.interval_s) and self._alive():
            answered = threading.Event()

            def ask(done: threading.Event = answered) -> None:
                with contextlib.suppress(Exception):  # the link closed under the probe: the
                    self._probe()  # watch ends, as `alive` reports next
                done.set()

            threading.Thread(target=ask, name=self._thread.name + "-probe", daemon=True).start()
            if not answered.wait(self.deadline_s) and not self._stopped.is_set():
                self._on_dead()
                return


class Outage:
    """How long a host has been out of reach, against its budget. Thread-safe."""

    def __init__(self, budget_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_s = budget_s
        self._clock = clock
        self._since: float | None = None
        self._lock = threading.Lock()
        self.given_up = False  # the budget was spent once: the host stays unreachable

    def fault(self) -> None:
        """A command was cut or a connection failed: the outage starts now unless it is on."""
        with self._lock:
            if self._since is None:
                self._since = self._clock()

    def recovered(self) -> None:
        """A connection succeeded: the outage, if any, is over."""
        with self._lock:
            self._since = None

    @property
    def elapsed_s(self) -> float:
        """Seconds since the outage began (0 when the host is reachable)."""
        with self._lock:
            return 0.0 if self._since is None else self._clock() - self._since

    @property
    def remaining_s(self) -> float:
        return max(0.0, self.budget_s - self.elapsed_s)

    def spent(self) -> bool:
        """True once the outage has lasted the whole budget; it then stays spent."""
        if not self.given_up and self._since is not None and self.remaining_s <= 0:
            self.given_up = True
        return self.given_up
