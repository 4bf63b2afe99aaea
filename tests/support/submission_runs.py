"""Real short-mode LoadGen runs in a real run store, judged and verified, for submission tests.

`real_runs(base)` runs the tiny SUT through real LoadGen (tests.support.loadgen_run) for a
resnet edge result set: SingleStream, MultiStream and Offline, each with performance, accuracy
(50,000 samples, the resnet dataset size the checker wants), TEST01 and TEST04 (with the round's
audit.config in the run directory, verified by bench.compliance), and an Offline power run
(ranging + testing under subrun's daemon with a simulated analyzer). Every run is judged by
bench.verdict and stored in a bench.store.RunStore, as a campaign does. Made once per session.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from bench.compliance import References, verify
from bench.rules import load_rules
from bench.run import Mode, RunKind, RunSpec, Scenario
from bench.settings import audit_config
from bench.store import RunStore
from bench.verdict import judge_dir
from power.daemon import Daemon, DaemonOptions
from power.phase import WorkloadCall
from power.session import PowerSettings, run_power
from submission.inputs import MEASUREMENT_FIELDS, BenchmarkInput, StoredRun
from submission.sources import stored_runs
from tests.support.loadgen_run import TinySut, run_loadgen

ROUND = "v6.1"
SCENARIOS = ("SingleStream", "MultiStream", "Offline")
KINDS = ("performance", "accuracy", "TEST01", "TEST04")
Settings = dict[str, str | int | float]
# short mode: a second or so per run, VALID (LoadGen generates enough queries for the SUT)
SETTINGS: dict[str, Settings] = {
    "SingleStream": {"min_duration": 1000, "target_latency": 0.5,
                     "performance_sample_count_override": 1024},
    "MultiStream": {"min_duration": 1500, "target_latency": 1,
                    "performance_sample_count_override": 1024},
    "Offline": {"min_duration": 1000, "target_qps": 100000,
                "performance_sample_count_override": 1024},
}
SAMPLE_TIME_US = {"SingleStream": 1000, "MultiStream": 250, "Offline": 20}
DIGEST = "sha256:" + "ab" * 32
_CACHE: dict[Path, RunStore] = {}


def spec_for(scenario: str, kind: str, settings: Settings | None = None,
             host: str = "local", mode: Mode = Mode.SHORT) -> RunSpec:
    return RunSpec(host=host, benchmark="tiny", model="resnet", scenario=Scenario(scenario),
                   kind=RunKind(kind), mode=mode, round=ROUND,
                   settings=SETTINGS[scenario] if settings is None else settings,
                   image_digest=DIGEST, loadgen_version="6.0.17")


def one_run(store: RunStore, work: Path, scenario: str, kind: str, *,
            refs: References | None = None, settings: Settings | None = None,
            sut: TinySut | None = None, user_conf_loads: int = 1,
            host: str = "local", timeout_s: float = 120.0,
            mode: Mode = Mode.SHORT) -> StoredRun:
    """One real LoadGen run: run, verify (TEST runs), judge, store. Returns the stored attempt."""
    spec = spec_for(scenario, kind, settings, host, mode)
    accuracy = kind == "accuracy"
    default_sut = (TinySut(total_samples=50000, sample_time_us=0) if accuracy
                   else TinySut(sample_time_us=SAMPLE_TIME_US[scenario]))
    audit = (audit_config(RunKind(kind), "resnet", load_rules(ROUND))
             if kind.startswith("TEST") else None)
    conf = "".join(f"*.{scenario}.{k} = {v}\n" for k, v in spec.settings.items())
    run_dir = work / f"{spec.key}-{len(list(work.glob(spec.key + '*')))}"
    out = run_loadgen(run_dir, scenario=scenario, mode="accuracy" if accuracy else "performance",
                      user_conf=conf, audit_config=audit, sut=sut or default_sut,
                      user_conf_loads=user_conf_loads, timeout_s=timeout_s)
    (out / "mlperf_log_trace.json").unlink(missing_ok=True)
    shutil.copyfile(run_dir / "user.conf", out / "user.conf")
    result = None
    if kind.startswith("TEST"):
        assert refs is not None, "a compliance run needs its reference runs"
        result = verify(RunKind(kind), out, refs, out, dtype="int32")
    verdict = judge_dir(spec, out, load_rules(ROUND), compliance=result)
    record = store.add_attempt(spec, out, verdict=verdict, exit_status=0)
    return StoredRun(record, store.path(record.key, record.attempt))


def power_run(store: RunStore, work: Path, scenario: str = "Offline") -> StoredRun:
    """A ranging + testing power run of the tiny SUT under subrun's daemon (simulated WT310E)."""
    out = work / f"power-{scenario}"

    def workload(call: WorkloadCall) -> None:
        conf = "".join(f"*.{scenario}.{k} = {v}\n" for k, v in SETTINGS[scenario].items())
        logs = run_loadgen(call.out_dir / "run", scenario=scenario, user_conf=conf,
                           sut=TinySut(sample_time_us=SAMPLE_TIME_US[scenario]))
        for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
            shutil.copyfile(logs / name, call.out_dir / name)
        shutil.rmtree(call.out_dir / "run")

    options = DaemonOptions(work / "ptd.log", 0, 49, "sim")
    with Daemon(options, stream=io.StringIO()) as daemon:
        run_power(PowerSettings(analyzer="sim", address="127.0.0.1", port=daemon.port,
                                label="tree", out_dir=out, settle_s=0.3, interval_ms=250,
                                poll_s=0.5), workload)
    spec = spec_for(scenario, "power")
    verdict = judge_dir(spec, out / "run_1", load_rules(ROUND))
    record = store.add_attempt(spec, out, verdict=verdict, exit_status=0)
    return StoredRun(record, store.path(record.key, record.attempt))


def real_runs(base: Path) -> RunStore:
    """The store of the resnet edge runs (3 scenarios x 4 kinds, and an Offline power run),
    made once a session. MultiStream compliance runs are retried a few times: on a loaded
    machine their p99 latency moves more than TEST01/TEST04 allow."""
    if base in _CACHE:
        return _CACHE[base]
    store, work = RunStore(base / "store"), base / "work"
    for scenario in SCENARIOS:
        perf = one_run(store, work, scenario, "performance")
        acc = one_run(store, work, scenario, "accuracy")
        refs = References(performance_dir=perf.folder, accuracy_dir=acc.folder)
        for kind in ("TEST01", "TEST04"):
            for _ in range(3 if scenario == "MultiStream" else 2):
                if one_run(store, work, scenario, kind, refs=refs).passed:
                    break
    power_run(store, work)
    shutil.rmtree(work)
    _CACHE[base] = store
    return store


def runs_of(store: RunStore) -> list[StoredRun]:
    return stored_runs(store)


def tiny_benchmark(context_dir: Path) -> BenchmarkInput:
    """The benchmark the runs above belong to, with a small build context."""
    context_dir.mkdir(parents=True, exist_ok=True)
    (context_dir / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY harness.py /app/\n")
    (context_dir / "harness.py").write_text("print('tiny SUT')\n")
    (context_dir / ".hidden").write_text("not for the tree\n")
    (context_dir / "__pycache__").mkdir(exist_ok=True)
    (context_dir / "__pycache__" / "harness.cpython-311.pyc").write_bytes(b"\0")
    values = dict(zip(MEASUREMENT_FIELDS, ("int32", "no", "tiny.onnx", "int32", "none"),
                      strict=True))
    return BenchmarkInput(name="tiny", model="resnet", contexts=(("tiny", context_dir),),
                          version="1.0", measurements=values,
                          command=lambda spec: f"python3 -m tiny --scenario {spec.scenario.value}"
                                               f" --mode {spec.kind.loadgen_mode}")
