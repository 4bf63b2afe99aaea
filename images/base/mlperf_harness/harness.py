"""One LoadGen test around a Backend: every scenario, performance or accuracy mode."""

from __future__ import annotations

import argparse
import array
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
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--max-batch", type=int, default=64)
    return parser.parse_args(argv)


def main(make_backend: Callable[[argparse.Namespace], Backend],
         argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run one LoadGen test with the backend, return the exit status."""
    args = parse_args(argv)
    if not os.path.isfile(args.user_conf):
        print(f"harness: {args.user_conf} not found in {os.getcwd()}; the run directory must "
              "hold user.conf", file=sys.stderr)
        return 2
    os.makedirs(args.output_dir, exist_ok=True)
    backend = make_backend(args)
    warm_up(backend)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, SCENARIOS[args.scenario])
    settings.mode = MODES[args.mode]
    settings.FromConfig(args.user_conf, args.model, SCENARIOS[args.scenario])
    logs = lg.LogSettings()
    logs.log_output.outdir = args.output_dir
    logs.log_output.copy_summary_to_stdout = True
    logs.enable_trace = False  # megabytes per run that no one reads
    workers = _Workers(backend, threads=max(1, args.threads), max_batch=args.max_batch)
    sut = lg.ConstructSUT(workers.issue, lambda: None)
    qsl = lg.ConstructQSL(backend.total_count, min(backend.performance_count,
                                                   backend.total_count),
                          backend.load, backend.unload)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, logs)
    finally:
        workers.stop()
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return 0


def warm_up(backend: Backend, samples: int = 64, rounds: int = 3) -> None:
    """Answer a few batches before LoadGen starts timing (allowed by the rules): first-call costs
    such as lazy imports and allocations would otherwise dominate a short run."""
    indices = list(range(min(samples, backend.performance_count, backend.total_count)))
    backend.load(indices)
    for _ in range(rounds):
        backend.predict(indices)
    backend.unload(indices)


class _Workers:
    """Threads answering queries; a query's samples are split into batches of max_batch."""

    def __init__(self, backend: Backend, *, threads: int, max_batch: int) -> None:
        self.backend = backend
        self.max_batch = max_batch
        self.work: queue.Queue[list[lg.QuerySample] | None] = queue.Queue()
        self.threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(threads)]
        for thread in self.threads:
            thread.start()

    def issue(self, samples: list[lg.QuerySample]) -> None:
        # a small query (a MultiStream one) is shared by all workers, a large one is cut into
        # max_batch pieces: latency and throughput both use every core
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
            try:
                labels = self.backend.predict([s.index for s in batch])
            except Exception:  # a SUT that stops answering would leave LoadGen waiting forever
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(3)
            # The reference flow logs each answer as a float32 label; the accuracy scripts read it.
            buffers = [array.array("B", np.float32(label).tobytes()) for label in labels]
            responses = [lg.QuerySampleResponse(s.id, b.buffer_info()[0], len(b))
                         for s, b in zip(batch, buffers, strict=True)]
            lg.QuerySamplesComplete(responses)
