"""A cancelled flow run stops its runs on the targets within seconds, from its own process.

Prefect's on_cancellation hook runs in the runner or worker once the flow's process is gone
(and not at all for a flow called directly), and `docker stop` waits a 10 s grace by default:
too late for a lab that wants its hosts back. So the flow's own process watches its flow run
on the server (a daemon thread asking every second). Once the flow run is CANCELLING or
CANCELLED, the campaign is marked cancelled (no run starts, a run's wait ends, a slot is no
longer waited for) and every run in flight is stopped (TERM, KILL after 2 s), collected into
the store and recorded `cancelled`. The sweep is repeated each second until the flow ends,
for an attempt that was starting at that very moment.

The watch knows a campaign only by its name, its `cancelled` event and how to stop its runs in
flight, so inference and training campaigns share it. A training campaign run by a deployment
is a subflow of `submission`: it watches the deployment's flow run, the one a user cancels.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.states import Cancelled, State

from bench.run import RunRecord, RunState
from bench.store import RunStore

POLL_S = 1.0
CANCELLING = {StateType.CANCELLING, StateType.CANCELLED}


class CancelWatch:
    """Watches one flow run; stops its campaign's runs once it is being cancelled.

    `cancelled` is the campaign's event (no run starts once it is set), `stop_runs` stops,
    collects and records the campaign's runs in flight and returns their records."""

    def __init__(self, flow_run_id: str, campaign: str, cancelled: threading.Event,
                 stop_runs: Callable[[], Iterable[RunRecord]],
                 logger: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self.flow_run_id = UUID(flow_run_id)
        self.campaign = campaign
        self._cancelled = cancelled
        self._stop_runs = stop_runs
        self.logger = logger
        self._stop = threading.Event()
        self._sweeping = threading.Lock()
        self._owns = threading.Event()  # set once the flow run holds its campaign's slot
        self._thread = threading.Thread(target=self._watch, name="subrun-cancel-watch",
                                        daemon=True)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def start(self) -> CancelWatch:
        self._thread.start()
        return self

    def own(self) -> None:
        """The flow run now holds its campaign: the runs in flight are its own to stop. Until
        then a cancel only stops the wait, never the runs of the flow run holding it."""
        self._owns.set()

    def stop(self) -> None:
        """The flow ends: stop watching (a sweep under way finishes first)."""
        self._stop.set()
        with self._sweeping:
            pass

    @contextmanager
    def on_interrupt(self) -> Iterator[None]:
        """Around the campaign's steps: an interruption that is a cancellation settles first."""
        try:
            yield
        except BaseException:
            self.settle()
            raise

    def settle(self) -> None:
        """The flow is being interrupted (a runner's TERM): when that is a cancellation, stop
        the runs now, before the process ends."""
        if self.cancelled or self._server_says_cancelled():
            self.cancel_now()

    def cancel_now(self) -> None:
        """Mark the campaign cancelled and stop, collect and record every run in flight."""
        if not self.cancelled:
            self.logger.info("flow run cancelled: stopping campaign %s's runs in flight",
                             self.campaign)
        self._cancelled.set()
        if not self._owns.is_set():
            return
        with self._sweeping:
            try:
                for record in self._stop_runs():
                    self.logger.info("cancelled %s (attempt %s)", record.spec.label,
                                     record.attempt)
            except Exception as e:  # swept again in a second, and by the hook
                self.logger.warning("stopping runs in flight: %s", e)

    def _server_says_cancelled(self) -> bool:
        with get_client(sync_client=True) as client:
            return self._is_cancelling(client)

    def _is_cancelling(self, client: Any) -> bool:
        state = client.read_flow_run(self.flow_run_id).state
        return state is not None and state.type in CANCELLING

    def _watch(self) -> None:
        with get_client(sync_client=True) as client:
            while not self._stop.wait(POLL_S):
                try:
                    if self.cancelled or self._is_cancelling(client):
                        self.cancel_now()
                except Exception as e:  # a busy server: ask again next second
                    self.logger.debug("reading the flow run's state: %s", e)


def cancelled_end(watch: CancelWatch | None, campaign: str, store: RunStore,
                  again: str) -> State[Any]:
    """The end of a cancelled campaign: a last sweep, then a Cancelled state saying how many
    runs were recorded cancelled and what starting the campaign again does."""
    if watch is not None:
        watch.cancel_now()
    stopped = sum(r.state == RunState.CANCELLED for r in store.runs())
    return Cancelled(message=f"{campaign} cancelled: {stopped} run(s) recorded cancelled; "
                             f"starting it again {again}.")
