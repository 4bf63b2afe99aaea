"""Real short-mode LoadGen runs in a real run store, judged and verified, for submission tests.

`real_runs(base)` runs the tiny SUT through real LoadGen (testkit.loadgen_run) for a
resnet edge result set: SingleStream, MultiStream and Offline, each with performance, accuracy
(50,000 samples, the resnet dataset size the checker wants), TEST01 and TEST04 (with the round's
audit.config in the run directory, verified by bench.compliance), and an Offline power run
(ranging + testing under subrun's daemon with a simulated analyzer). Every run is judged by
bench.verdict and stored in a bench.store.RunStore, as a campaign does. Made once per session.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.execute import judge_collected, reverify
from bench.rules import load_rules
from bench.run import Mode, RunKind, RunRecord, RunSpec, Scenario
from bench.settings import audit_config
from bench.settle import ComplianceSet, is_settled, settle
from bench.store import RunStore
from bench.verdict import judge_dir
from power.daemon import Daemon, DaemonOptions
from power.phase import WorkloadCall
from power.session import PowerSettings, run_power
from submission.inputs import MEASUREMENT_FIELDS, BenchmarkInput, StoredRun
from submission.sources import stored_runs
from testkit.loadgen_run import TinySut, run_loadgen

ROUND = "v6.1"
SCENARIOS = ("SingleStream", "MultiStream", "Offline")
KINDS = ("performance", "accuracy", "TEST01", "TEST04")
Settings = dict[str, str | int | float]
# short mode: a few seconds per run, VALID (LoadGen generates enough queries for the SUT)
SETTINGS: dict[str, Settings] = {
    "SingleStream": {"min_duration": 1000, "target_latency": 0.5, "min_query_count": 1500,
                     "performance_sample_count_override": 1024},
    "MultiStream": {"min_duration": 1500, "target_latency": 1, "min_query_count": 3000,
                    "performance_sample_count_override": 1024},
    "Offline": {"min_duration": 1000, "target_qps": 100000,
                "performance_sample_count_override": 1024},
}
SAMPLE_TIME_US = {"SingleStream": 1000, "MultiStream": 250, "Offline": 20}
# Each latency scenario's SUT has a tail of its own above its percentile (20 % of SingleStream
# queries at 3x for p90, 10 % of MultiStream queries at 5x for p99): the early-stopping estimate
# lands on that plateau, so TEST01/TEST04 compare the SUT, not the stalls of a busy machine.
TAILS = {"SingleStream": (5, 3.0), "MultiStream": (10, 5.0), "Offline": (0, 1.0)}


def tiny_sut(scenario: str, slowdown: float = 1.0) -> TinySut:
    """The fixture's SUT for a scenario (slowdown > 1: a disturbed measurement)."""
    every, factor = TAILS[scenario]
    return TinySut(sample_time_us=SAMPLE_TIME_US[scenario] * slowdown, inline=True,
                   tail_every=every, tail_factor=factor)


# the system description of the machine the runs above stand for (an edge box, closed)
SYSTEM = {"division": "closed", "submitter": "ACME", "status": "available",
          "system_name": "tiny box", "number_of_nodes": 1, "host_processor_model_name": "cpu",
          "host_processors_per_node": 1, "host_processor_core_count": 2,
          "host_memory_capacity": "24 GB", "host_storage_capacity": "250 GB",
          "host_storage_type": "SSD", "accelerators_per_node": "0",
          "accelerator_model_name": "N/A", "accelerator_memory_capacity": "N/A",
          "framework": "LoadGen", "operating_system": "Debian 12", "system_type": "edge",
          "other_software_stack": "Python 3.11", "host_processor_frequency": "2.6 GHz",
          "host_processor_caches": "N/A", "host_memory_configuration": "N/A",
          "host_processor_interconnect": "N/A", "host_networking": "Ethernet",
          "host_networking_topology": "N/A", "accelerator_frequency": "N/A",
          "accelerator_host_interconnect": "N/A", "accelerator_interconnect": "N/A",
          "accelerator_interconnect_topology": "N/A", "accelerator_memory_configuration": "N/A",
          "accelerator_on-chip_memories": "N/A", "cooling": "air", "hw_notes": "",
          "sw_notes": "", "host_network_card_count": 1, "system_type_detail": ""}

DIGEST = "sha256:" + "ab" * 32
MAX_RERUNS = 4
_CACHE: dict[Path, RunStore] = {}


def spec_for(scenario: str, kind: str, settings: Settings | None = None,
             host: str = "local", mode: Mode = Mode.SHORT) -> RunSpec:
    return RunSpec(host=host, benchmark="tiny", model="resnet", scenario=Scenario(scenario),
                   kind=RunKind(kind), mode=mode, round=ROUND,
                   settings=SETTINGS[scenario] if settings is None else settings,
                   image_digest=DIGEST, loadgen_version="6.0.17")


def one_run(store: RunStore, work: Path, scenario: str, kind: str, *,
            refs: Mapping[RunKind, RunRecord] | None = None, settings: Settings | None = None,
            sut: TinySut | None = None, user_conf_loads: int = 1,
            host: str = "local", timeout_s: float = 120.0,
            mode: Mode = Mode.SHORT) -> StoredRun:
    """One real LoadGen run: run, then collect and judge it as a campaign does (a TEST run is
    verified against refs, the standing reference attempts). Returns the stored attempt."""
    spec = spec_for(scenario, kind, settings, host, mode)
    accuracy = kind == "accuracy"
    default_sut = (TinySut(total_samples=50000, sample_time_us=0) if accuracy
                   else tiny_sut(scenario))
    audit = (audit_config(RunKind(kind), "resnet", load_rules(ROUND))
             if kind.startswith("TEST") else None)
    conf = "".join(f"*.{scenario}.{k} = {v}\n" for k, v in spec.settings.items())
    run_dir = work / f"{spec.key}-{len(list(work.glob(spec.key + '*')))}"
    out = run_loadgen(run_dir, scenario=scenario, mode="accuracy" if accuracy else "performance",
                      user_conf=conf, audit_config=audit, sut=sut or default_sut,
                      user_conf_loads=user_conf_loads, timeout_s=timeout_s)
    (out / "mlperf_log_trace.json").unlink(missing_ok=True)
    shutil.copyfile(run_dir / "user.conf", out / "user.conf")
    if audit is not None:
        shutil.copyfile(run_dir / "audit.config", out / "audit.config")
    if kind.startswith("TEST"):
        assert refs is not None, "a compliance run needs its reference runs"
    record = store.start_attempt(spec)
    store.add_files(spec.key, record.attempt, out)
    record = store.update(spec.key, record.attempt, exit_status=0)
    record = judge_collected(record, store, load_rules(ROUND), refs)
    return StoredRun(record, store.path(record.key, record.attempt))


@dataclass
class TinySet:
    """The runs of one scenario of the tiny SUT, for bench.settle (what a campaign's runner does
    on a target, done here with local LoadGen runs)."""

    store: RunStore
    work: Path
    scenario: str
    accuracy: RunRecord
    sut: TinySut | None = None  # the SUT of the performance run (a slow one, in tests)

    def measure_again(self) -> RunRecord:
        return one_run(self.store, self.work, self.scenario, "performance").record

    def rerun(self, test: RunKind) -> RunRecord:
        return one_run(self.store, self.work, self.scenario, test.value, refs=self.refs()).record

    def reverify(self, test: RunRecord, performance: RunRecord) -> RunRecord:
        refs = {RunKind.PERFORMANCE: performance, RunKind.ACCURACY: self.accuracy}
        return reverify(self.store, test, load_rules(ROUND), refs)

    def ran_at(self, test: RunRecord, performance: RunRecord) -> bool:
        return True  # every run of the tiny SUT runs at the same settings

    def refs(self) -> dict[RunKind, RunRecord]:
        perf = self.store.standing(spec_for(self.scenario, "performance").key)
        assert perf is not None, f"{self.scenario}: no passing performance run"
        return {RunKind.PERFORMANCE: perf, RunKind.ACCURACY: self.accuracy}

    def first(self, *, max_reruns: int = MAX_RERUNS) -> ComplianceSet:
        """Performance, then TEST01 and TEST04 once each, then settled as a campaign does."""
        one_run(self.store, self.work, self.scenario, "performance", sut=self.sut)
        tests = {}
        for kind in (RunKind.TEST01, RunKind.TEST04):
            tests[kind] = one_run(self.store, self.work, self.scenario, kind.value,
                                  refs=self.refs()).record.key
        runs = ComplianceSet(spec_for(self.scenario, "performance").key, tests)
        settle(self.store, runs, self, max_reruns)
        return runs


def power_run(store: RunStore, work: Path, scenario: str = "Offline") -> StoredRun:
    """A ranging + testing power run of the tiny SUT under subrun's daemon (simulated WT310E)."""
    out = work / f"power-{scenario}"

    def workload(call: WorkloadCall) -> None:
        conf = "".join(f"*.{scenario}.{k} = {v}\n" for k, v in SETTINGS[scenario].items())
        logs = run_loadgen(call.out_dir / "run", scenario=scenario, user_conf=conf,
                           sut=tiny_sut(scenario))
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
    made once a session. Each scenario's performance, TEST01 and TEST04 are settled as a
    campaign settles them (bench.settle), so a busy machine costs re-runs, not results."""
    if base in _CACHE:
        return _CACHE[base]
    store, work = RunStore(base / "store"), base / "work"
    for scenario in SCENARIOS:
        accuracy = one_run(store, work, scenario, "accuracy").record
        runs = TinySet(store, work, scenario, accuracy).first()
        if not is_settled(store, runs):
            latest = [store.latest(k) for k in runs.tests.values()]
            pytest.fail(f"{scenario}: no consistent performance/TEST01/TEST04 set within "
                        f"{MAX_RERUNS} re-runs: " + "; ".join(
                            f"{r.spec.kind.value}: {r.verdict.reason if r.verdict else r.state}"
                            for r in latest if r is not None))
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
