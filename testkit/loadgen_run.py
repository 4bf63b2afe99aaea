"""Real LoadGen runs for tests: a tiny Python SUT and QSL, driven like a benchmark harness.

`run_loadgen(run_dir, scenario=..., ...)` writes `user.conf` (and `audit.config` when given) into
run_dir, starts a fresh Python interpreter with run_dir as its working directory (the in-container
contract of `bench.run`: LoadGen looks for `audit.config` in the cwd), runs the real
`mlperf_loadgen` there and returns `run_dir/output` holding LoadGen's logs (and `accuracy.txt` for
an accuracy run). A fresh interpreter per run is needed, not a convenience: LoadGen counts user conf
loads in a process-wide static, so a second run in one process logs "Multiple conf files are used"
and skips the built-in mlperf.conf (its seeds among them).

The SUT answers sample i with the label `label_of(i)` (or a wrong one for a chosen share of samples)
as one little-endian int32; `score_accuracy` is the matching accuracy script, writing accuracy.txt
in the resnet reference format (`accuracy=..%, good=.., total=..`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LABELS = 1000


@dataclass(frozen=True)
class TinySut:
    """How the test SUT behaves."""

    total_samples: int = 1024
    performance_samples: int = 1024
    sample_time_us: float = 0.0  # time the SUT spends per sample (one worker, FIFO)
    accuracy_pct: float = 100.0  # share of samples answered with their true label
    deterministic: bool = True  # False: answers differ run to run (TEST01 fallback path)
    inline: bool = False  # answer inside LoadGen's issue call: no thread hand-off to add jitter
    # a latency tail of the SUT's own: every tail_every-th query takes tail_factor times as long,
    # so a high percentile lands on that plateau and measures the SUT, not the machine's stalls
    tail_every: int = 0
    tail_factor: float = 1.0


def label_of(index: int) -> int:
    """The ground-truth label of sample index."""
    return (index * 7919 + 13) % LABELS


def is_answered_right(index: int, accuracy_pct: float) -> bool:
    """Whether the SUT answers sample index correctly; a fixed, spread-out subset."""
    return (index * 2654435761 % 10007) / 10007 * 100.0 < accuracy_pct


def run_loadgen(
    run_dir: Path,
    *,
    scenario: str,
    mode: str = "performance",
    user_conf: str = "",
    audit_config: str | None = None,
    model: str = "resnet50",
    sut: TinySut | None = None,
    user_conf_loads: int = 1,
    timeout_s: float = 120.0,
) -> Path:
    """Run real LoadGen once in run_dir (scenario and mode "performance" or "accuracy"); return
    the output directory with the logs. user_conf_loads=2 makes the harness load user.conf twice,
    which LoadGen reports as an error."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "user.conf").write_text(user_conf)
    if audit_config is not None:
        (run_dir / "audit.config").write_text(audit_config)
    output = run_dir / "output"
    output.mkdir(exist_ok=True)
    job = {"scenario": scenario, "mode": mode, "model": model, "output": str(output),
           "user_conf_loads": user_conf_loads, "sut": asdict(sut or TinySut())}
    done = subprocess.run([sys.executable, __file__, json.dumps(job)], cwd=run_dir,
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise AssertionError(f"LoadGen run in {run_dir} exited {done.returncode}:\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    if mode == "accuracy":
        text = score_accuracy(output / "mlperf_log_accuracy.json")
        (output / "accuracy.txt").write_text(text)
    return output


def score_accuracy(accuracy_json: Path) -> str:
    """The accuracy script of the test benchmark: accuracy.txt text from an accuracy log."""
    entries = json.loads(Path(accuracy_json).read_text())
    seen: dict[int, bool] = {}
    for entry in entries:
        value = int.from_bytes(bytes.fromhex(entry["data"])[:4], "little", signed=True)
        seen[entry["qsl_idx"]] = value % LABELS == label_of(entry["qsl_idx"])
    good = sum(seen.values())
    total = len(seen)
    return f"accuracy={100.0 * good / max(total, 1):.3f}%, good={good}, total={total}\n"


def _child_main(job: dict[str, Any]) -> None:
    """Runs in the fresh interpreter: one LoadGen test with the tiny SUT."""
    import array
    import gc
    import queue
    import random
    import threading
    import time

    import mlperf_loadgen as lg

    sut = TinySut(**job["sut"])
    work: queue.Queue[tuple[float, list[Any]] | None] = queue.Queue()

    def answer(index: int) -> int:
        label = label_of(index) if is_answered_right(index, sut.accuracy_pct) else (
            label_of(index) + 1) % LABELS
        return label if sut.deterministic else label + LABELS * random.randint(1, 9)

    queries = iter(range(1 << 62))
    free_at = [0.0]  # when the SUT's one worker is done with what it was given so far

    def serve(issued: float, samples: list[Any]) -> None:
        # a FIFO server with a fixed service time, paced from when each query was issued: a
        # sleep that oversleeps on a busy machine delays this answer, never the ones after it
        if sut.sample_time_us:
            tail = sut.tail_every and next(queries) % sut.tail_every == 0
            took = len(samples) * sut.sample_time_us / 1e6 * (sut.tail_factor if tail else 1)
            free_at[0] = max(issued, free_at[0]) + took
            if (delay := free_at[0] - time.monotonic()) > 0:
                time.sleep(delay)
        buffers = [array.array("i", [answer(s.index)]) for s in samples]
        responses = [lg.QuerySampleResponse(s.id, b.buffer_info()[0], 4)
                     for s, b in zip(samples, buffers, strict=True)]
        lg.QuerySamplesComplete(responses)

    def worker() -> None:
        while (item := work.get()) is not None:
            serve(*item)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    if sut.inline:
        gc.disable()  # a collection in the middle of a query is a latency spike of the test's own
    issue = (lambda samples: serve(time.monotonic(), list(samples))) if sut.inline else (
        lambda samples: work.put((time.monotonic(), list(samples))))
    system = lg.ConstructSUT(issue, lambda: None)
    library = lg.ConstructQSL(sut.total_samples, sut.performance_samples,
                              lambda _: None, lambda _: None)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, job["scenario"])
    settings.mode = (lg.TestMode.AccuracyOnly if job["mode"] == "accuracy"
                     else lg.TestMode.PerformanceOnly)
    for _ in range(job["user_conf_loads"]):
        settings.FromConfig("user.conf", job["model"], job["scenario"])
    logs = lg.LogSettings()
    logs.log_output.outdir = job["output"]
    logs.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(system, library, settings, logs)
    work.put(None)
    thread.join(timeout=10)
    lg.DestroyQSL(library)
    lg.DestroySUT(system)


def _quiet_priority() -> None:
    """The SUT at the highest priority the user may take: the timing comparisons of compliance
    tests then measure the SUT, not the other jobs of a shared machine."""
    with contextlib.suppress(OSError):  # not root: the default priority
        os.setpriority(os.PRIO_PROCESS, 0, -20)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    _quiet_priority()
    _child_main(json.loads(sys.argv[1]))
