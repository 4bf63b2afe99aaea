"""One LoadGen test around a Backend: every scenario, performance or accuracy mode."""

from __future__ import annotations

import argparse
import array
import faulthandler
import gc
import os
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Protocol

import mlperf_loadgen as lg
import numpy as np

SCENARIOS = {"SingleStream": "SingleStream", "MultiStream": "MultiStream", "Offline": "Offline",
             "Server": "Server", "Interactive": "Server"}
MODES = {"PerformanceOnly": lg.TestMode.PerformanceOnly, "AccuracyOnly": lg.TestMode.AccuracyOnly}
# Answered on LoadGen's issue thread: the next query waits for this one anyway, and a hand-off to
# a worker (queue, wake-up, GIL switch) would cost more than a 20-us query itself.
INLINE = frozenset({"SingleStream", "MultiStream"})


class Backend(Protocol):
    """A dataset and a model, as LoadGen needs them."""

    total_count: int  # samples in the dataset (what an accuracy run covers)
    performance_count: int  # samples held in memory for a performance run

    def load(self, indices: Sequence[int]) -> None: ...

    def unload(self, indices: Sequence[int]) -> None: ...

    def predict(self, indices: Sequence[int]) -> np.ndarray: ...  # one label per sample


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments every benchmark harness takes (benchmark.yaml fills them in)."""
    parser = argparse.ArgumentParser(description="Run one LoadGen test.")
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--mode", required=True, choices=sorted(MODES))
    parser.add_argument("--model", required=True, help="model key in mlperf.conf/user.conf")
    parser.add_argument("--user-conf", default="user.conf")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--dataset-dir", default="")
    parser.add_argument("--model-dir", default="")
    parser.add_argument("--threads", type=int, default=usable_cores(),
                        help="Offline/Server workers (default: the cores this process may use)")
    parser.add_argument("--max-batch", type=int, default=64)
    return parser.parse_args(argv)


def usable_cores() -> int:
    """The cores this process may run on (`docker --cpuset-cpus`, taskset), not the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def main(make_backend: Callable[[argparse.Namespace], Backend],
         argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one LoadGen test with the backend, return the exit status."""
    # a crash in native code (LoadGen, numpy) prints every thread's Python stack to stderr,
    # which the run record keeps: a rare segfault after a finished test is found by its frame
    faulthandler.enable()
    args = parse_args(argv)
    if not os.path.isfile(args.user_conf):
        print(f"harness: {args.user_conf} not found in {os.getcwd()}; the run directory must "
              "hold user.conf", file=sys.stderr)
        return 2
    os.makedirs(args.output_dir, exist_ok=True)
    backend = make_backend(args)
    labels = warm_up(backend)
    scenario = SCENARIOS[args.scenario]
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = MODES[args.mode]
    settings.FromConfig(args.user_conf, args.model, scenario)
    logs = lg.LogSettings()
    logs.log_output.outdir = args.output_dir
    logs.log_output.copy_summary_to_stdout = True
    logs.enable_trace = False  # megabytes per run that no one reads
    respond = _Responder(backend, labels)
    workers = None if scenario in INLINE else _Workers(
        respond, threads=max(1, args.threads), max_batch=args.max_batch)
    sut = lg.ConstructSUT(workers.issue if workers else respond, lambda: None)
    qsl = lg.ConstructQSL(backend.total_count, min(backend.performance_count,
                                                   backend.total_count),
                          backend.load, backend.unload)
    _quiet_gc()
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, logs)
    finally:
        gc.enable()
        if workers:
            workers.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return 0


def warm_up(backend: Backend, samples: int = 64, rounds: int = 3) -> list[int]:
    """Answer a few batches before LoadGen starts timing (allowed by the rules): first-call costs
    such as lazy imports and allocations would otherwise dominate a short run. Returns the labels
    seen, so their answer buffers are made before timing too."""
    indices = list(range(min(samples, backend.performance_count, backend.total_count)))
    backend.load(indices)
    seen = {label for _ in range(rounds) for label in backend.predict(indices).tolist()}
    for size in (1, 8):  # the shapes of SingleStream and MultiStream queries
        backend.predict(indices[:size])
    backend.unload(indices)
    return sorted(seen)


def _quiet_gc() -> None:
    """No collector pauses inside measured latencies: what loading made is frozen out of every
    future collection, and collection is off for the test. Answering a query makes no reference
    cycles (plain lists, arrays, LoadGen's objects), so reference counting frees it all."""
    gc.collect()
    gc.freeze()
    gc.disable()


class _Responder:
    """Answers one batch of samples: the backend's labels, each logged as a float32 buffer."""

    def __init__(self, backend: Backend, labels: Sequence[int] = ()) -> None:
        self.backend = backend
        # one read-only buffer per label, alive to the end: LoadGen copies what it logs
        self.buffers: dict[int, array.array[int]] = {}
        self.answers: dict[int, tuple[int, int]] = {}
        for label in labels:
            self._answer(label)

    def __call__(self, samples: list[lg.QuerySample]) -> None:
        try:
            labels = self.backend.predict([s.index for s in samples]).tolist()
            answers = [self.answers.get(label) or self._answer(label) for label in labels]
        except Exception:  # a SUT that stops answering would leave LoadGen waiting forever
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(3)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, address, size)
                                 for s, (address, size) in zip(samples, answers, strict=True)])

    def _answer(self, label: int) -> tuple[int, int]:
        # The reference flow logs each answer as a float32 label; the accuracy scripts read it.
        buffer = array.array("B", np.float32(label).tobytes())
        self.buffers[label] = buffer
        self.answers[label] = (buffer.buffer_info()[0], len(buffer))
        return self.answers[label]


class _Workers:
    """Threads answering Offline and Server queries, cut into batches of at most max_batch."""

    def __init__(self, respond: _Responder, *, threads: int, max_batch: int) -> None:
        self.respond = respond
        self.max_batch = max_batch
        self.work: queue.SimpleQueue[list[lg.QuerySample] | None] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(threads)]
        for thread in self.threads:
            thread.start()

    def issue(self, samples: list[lg.QuerySample]) -> None:
        # a large query is cut into max_batch pieces, fewer when that leaves a worker idle
        size = min(self.max_batch, max(1, -(-len(samples) // len(self.threads))))
        for start in range(0, len(samples), size):
            self.work.put(samples[start:start + size])

    def stop(self) -> None:
        for _ in self.threads:
            self.work.put(None)
        for thread in self.threads:
            thread.join(timeout=30)

    def _serve(self) -> None:
        while (batch := self.work.get()) is not None:
            self.respond(batch)
