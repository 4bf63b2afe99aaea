"""The daemon's measuring state: a sampler thread over one analyzer, marks, logs and console.

`Meter` answers what PTDaemon's commands ask (identity, ranges, Go/Stop, unread samples,
latest values, uncertainty) and keeps every sample of a measurement in memory and in the `-l`
log, flushed line by line. If the analyzer stops answering, the running measurement is aborted,
its samples stay readable with `RL`, and every later command that needs the analyzer gets an
error naming the moment and the cause.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypeVar

from power import protocol
from power.instrument import (
    Analyzer,
    AnalyzerError,
    AnalyzerLost,
    RangeState,
    Reading,
    round_up_range,
    uncertainty_w,
)
from power.protocol import Sample

T = TypeVar("T")

IDLE_INTERVAL_MS = 1000
UNCERTAINTY_LIMIT = 0.01  # the Power WG's 1 % limit per testing sample
CONSOLE_LINE_MAX = 512  # a console line is cut here: a client's long line is not echoed whole


class Stream(Protocol):
    """Where console lines go: stdout, a StringIO, or a capped console file."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


def utc_now() -> datetime:
    """The present instant in UTC."""
    return datetime.now(UTC)


class Console:
    """Timestamped PTDaemon-style console lines on a stream, one flush per line."""

    def __init__(self, stream: Stream, clock: Callable[[], datetime] = utc_now) -> None:
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def say(self, message: str) -> None:
        """Write `<stamp>: <message>`."""
        self.raw(protocol.console_line(self._clock(), message))

    def raw(self, line: str) -> None:
        """Write one line as it is (cut at CONSOLE_LINE_MAX characters)."""
        if len(line) > CONSOLE_LINE_MAX:
            line = f"{line[:CONSOLE_LINE_MAX]}... ({len(line)} characters)"
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class SampleLog:
    """The `-l` file: one `Time,...,Mark,...` line per measured sample, plus event lines."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="ascii", buffering=1)
        self._lock = threading.Lock()

    def sample(self, sample: Sample, mark: str) -> None:
        """Append one sample line."""
        self._write(sample.log_line(mark))

    def event(self, moment: datetime, kind: str, message: str) -> None:
        """Append `Time,<stamp>,<KIND>,<message>` (skipped by sample parsers)."""
        self._write(f"Time,{protocol.format_time(moment)},{kind},{message}")

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            self._file.close()

    def _write(self, line: str) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")


@dataclass
class Measurement:
    """One Go..Stop span: its mark, pace and samples, and how it ended."""

    mark: str
    interval_ms: int
    limit: int  # samples to take, 0 for untimed
    samples: list[Sample] = field(default_factory=list)
    unread: int = 0
    running: bool = True
    aborted: str | None = None


class Meter:
    """One analyzer sampled on a steady beat; the commands of the protocol act on it."""

    def __init__(self, analyzer: Analyzer, console: Console, log: SampleLog,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.analyzer = analyzer
        self.console = console
        self.log = log
        self._clock = clock
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self.failure: str | None = None
        self.measurement: Measurement | None = None
        self.latest: Sample | None = None
        self._ranges: RangeState = analyzer.ranges()

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def close(self) -> None:
        """Stop sampling and release the analyzer."""
        self._closing.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.analyzer.close()

    # --- commands ---------------------------------------------------------------------

    def ranges(self) -> protocol.Ranges:
        """The analyzer's ranges as `RR` reports them."""
        with self._lock:
            self._require_analyzer()
            state = self._ranges = self._io(self.analyzer.ranges)
        return protocol.Ranges(state.amps_auto, state.amps_range, state.volts_auto,
                               state.volts_range)

    def set_range(self, quantity: str, value: float | None) -> None:
        """Set the V or A range (None for auto); raises AnalyzerError on refusal."""
        with self._lock:
            self._require_analyzer()
            name = "voltage" if quantity == "V" else "current"
            chosen = self._io(lambda: self.analyzer.set_range(name, value))
            self._ranges = self._io(self.analyzer.ranges)
        shown = "Auto" if chosen is None else f"{chosen:g}"
        self.console.say(f"Range {quantity} set to {shown}")

    def go(self, interval_ms: int, limit: int, mark: str) -> None:
        """Start a measurement marked mark; raises AnalyzerError when one cannot start."""
        with self._lock:
            self._require_analyzer()
            if self.measurement and self.measurement.running:
                raise AnalyzerError(f"a measurement is already running (mark "
                                    f"'{self.measurement.mark}'); send Stop first")
            self.measurement = Measurement(mark, interval_ms, limit)
        self.console.say(f"Go with mark {mark!r}")
        self._wake.set()

    def stop(self) -> tuple[bool, str]:
        """End the measurement: (True, reply) when it ran to here, else (False, error)."""
        with self._lock:
            m = self.measurement
            if m is None or (not m.running and m.aborted is None):
                return False, protocol.NO_MEASUREMENT
            if m.aborted is not None:
                error = (f"Error: measurement '{m.mark}' was aborted: {m.aborted}; its "
                         f"{len(m.samples)} samples stay readable with RL")
                m.aborted = None  # reported once; a second Stop has nothing to stop
                return False, error
            m.running = False
        self.console.say("Completed test")
        self._wake.set()
        return True, protocol.STOP_REPLY

    def read_unread(self) -> list[Sample]:
        """Samples of the present or last measurement not returned before."""
        with self._lock:
            m = self.measurement
            if m is None:
                return []
            fresh, m.unread = m.samples[m.unread:], len(m.samples)
            return fresh

    def last_sample(self) -> Sample:
        """The newest sample, read now if the sampler has none yet."""
        with self._lock:
            self._require_analyzer()
            if self.latest is None:
                self.latest = self._io(self._take)
            return self.latest

    def uncertainty(self) -> tuple[float, float]:
        """(relative, absolute W) uncertainty of the newest sample."""
        sample = self.last_sample()
        absolute = self._uncertainty_w(sample)
        relative = absolute / abs(sample.watts) if sample.watts else math.nan
        return relative, absolute

    def set_load(self, busy: bool) -> None:
        """Select the simulated load profile."""
        with self._lock:
            self.analyzer.set_load(busy)
        self.console.say(f"Simulated load set to {'busy' if busy else 'idle'}")

    # --- sampling ---------------------------------------------------------------------

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._closing.is_set():
            interval_s = self._interval_ms() / 1000
            if self._wake.wait(timeout=max(0.0, next_tick - time.monotonic())):
                self._wake.clear()  # Go or Stop changed the beat: start it again from now
                next_tick = time.monotonic() + self._interval_ms() / 1000
                continue
            next_tick += interval_s
            if not self._tick():
                return

    def _tick(self) -> bool:
        with self._lock:
            try:
                sample = self._take()
            except AnalyzerLost as e:
                self._fail(str(e))
                return False
            self.latest = sample
            m = self.measurement if self.measurement and self.measurement.running else None
            if m is not None:
                m.samples.append(sample)
                self.log.sample(sample, m.mark)
                self._police(sample)
                if m.limit and len(m.samples) >= m.limit:
                    m.running = False
                    self.console.say("Completed test")
        mark = m.mark if m else "notset"
        self.console.raw(f"{protocol.format_time(sample.time)},{sample.values()},Mark,{mark}")
        return True

    def _take(self) -> Sample:
        moment = self._clock()
        reading = self.analyzer.read()
        for name in ("volts", "amps", "watts", "pf"):
            if math.isnan(getattr(reading, name)):
                self.console.say(f"ERROR: Bad {name} reading nan from {self.analyzer.spec.name}")
        return Sample(moment, reading.watts, reading.volts, reading.amps, reading.pf)

    def _police(self, sample: Sample) -> None:
        absolute = self._uncertainty_w(sample)
        if sample.watts and absolute / abs(sample.watts) > UNCERTAINTY_LIMIT:
            self.console.say(f"WARNING: Uncertainty {100 * absolute / abs(sample.watts):.2f}%, "
                             f"which is above {100 * UNCERTAINTY_LIMIT:.2f}% limit for the "
                             "last sample!")

    def _uncertainty_w(self, sample: Sample) -> float:
        spec, state = self.analyzer.spec, self._ranges
        try:  # while auto-ranging, assume the range the instrument picks: the next one up
            volts = (round_up_range(sample.volts, spec.volts_ranges, "voltage", spec.name)
                     if state.volts_auto else state.volts_range)
            amps = (round_up_range(sample.amps, spec.amps_ranges, "current", spec.name)
                    if state.amps_auto else state.amps_range)
        except AnalyzerError:
            return math.nan
        reading = Reading(sample.volts, sample.amps, sample.watts, sample.pf)
        return uncertainty_w(spec, reading, RangeState(state.volts_auto, volts,
                                                       state.amps_auto, amps))

    def _fail(self, message: str) -> None:
        moment = self._clock()
        self.failure = (f"the analyzer stopped answering at {protocol.format_time(moment)} UTC: "
                        f"{message}")
        m = self.measurement
        if m is not None and m.running:
            m.running = False
            m.aborted = self.failure
        self.console.say(f"ERROR: {self.failure}")
        self.log.event(moment, "ERROR", self.failure)

    def _interval_ms(self) -> int:
        m = self.measurement
        return m.interval_ms if m is not None and m.running else IDLE_INTERVAL_MS

    def _require_analyzer(self) -> None:
        if self.failure is not None:
            raise AnalyzerError(self.failure)

    def _io(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except AnalyzerLost as e:
            self._fail(str(e))
            raise
