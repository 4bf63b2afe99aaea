"""Build `<division>/<submitter>/...` from the run store, the system JSONs and the benchmarks.

A result (host, benchmark, scenario) enters the tree only when every run it needs has a passing
attempt: performance (or power, whose testing run is the performance run), accuracy, and the
round's compliance tests for the model (closed and network divisions). Anything short of that is
listed in the index with the reason, never half-written: a half result crashes the checker.

The tree is built in a sibling staging folder and swapped in at the end in one step
(submission.swap), so a failed or killed assembly leaves the previous tree as it was. The index
(which run produced which folder) is written next to the tree, outside it, because the tree may
hold nothing but what the checkers expect.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.run import RunKind
from lab.errors import ConfigError
from submission import documents, place, swap
from submission.index import PlacedResult, RunRef, SkippedResult, TreeIndex, write_index
from submission.inputs import BenchmarkInput, StoredRun, SystemInput, latest_attempts
from submission.layout import Layout, ResultKey, Style

ResultRuns = dict[RunKind, StoredRun]


@dataclass(frozen=True)
class TreeRequest:
    """Where the tree goes and what it is: division, submitter, round, layout style, tests."""

    root: Path
    division: str
    submitter: str
    round: str
    style: Style = Style.V6
    required_tests: Callable[[str], Sequence[str]] = lambda model: ()  # official model -> TESTs
    # a dry run with a stand-in model: a result whose accuracy run missed only its target enters
    # the tree (the official checker then names its accuracy); by default it is left out
    accuracy_misses: bool = False

    def tests_for(self, model: str) -> list[str]:
        """The compliance tests a result of model must carry in this division."""
        return [] if self.division == "open" else list(self.required_tests(model))


def assemble(request: TreeRequest, runs: Iterable[StoredRun],
             systems: Mapping[str, SystemInput],
             benchmarks: Mapping[str, BenchmarkInput]) -> TreeIndex:
    """Write the submission tree for the latest passing attempt of each run; return its index."""
    staging = request.root.with_name(request.root.name + ".assembling")
    swap.recover(request.root)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        return _assemble(request, staging, runs, systems, benchmarks)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _assemble(request: TreeRequest, staging: Path, runs: Iterable[StoredRun],
              systems: Mapping[str, SystemInput],
              benchmarks: Mapping[str, BenchmarkInput]) -> TreeIndex:
    layout = Layout(staging, request.division, request.submitter, request.style)
    index = TreeIndex(root=str(request.root), division=request.division,
                      submitter=request.submitter, round=request.round, style=request.style.value)
    runs = list(runs)
    failing = {(r.spec.host, r.spec.benchmark, r.spec.scenario.value, r.spec.kind): r
               for r in latest_attempts(runs, passing_only=False) if not r.passed}
    used: dict[str, list[StoredRun]] = {}
    for (host, bench_name, scenario), group in sorted(
            _group(runs, request.accuracy_misses).items()):
        bench = _benchmark(benchmarks, bench_name)
        key = ResultKey(_system(systems, host).system_id, _model_dir(request, bench), scenario)
        missing = _missing(request, bench, group)
        if missing:
            why = [f"{k.value}: {_reason(r)}" for (h, b, s, k), r in sorted(failing.items())
                   if (h, b, s) == (host, bench_name, scenario) and k.value in missing]
            index.skipped.append(SkippedResult(
                host=host, benchmark=bench_name, scenario=scenario,
                reason=_skip_reason(missing, why),
                runs={k.value: RunRef.of(r) for k, r in group.items()}))
            continue
        index.warnings += place.result(layout, key, bench, group)
        _write(layout.readme(key), documents.readme(bench, key.system, group, key.model))
        index.results.append(PlacedResult(
            system=key.system, model_dir=key.model, scenario=scenario, host=host,
            benchmark=bench_name, model=bench.model,
            folder=layout.relative(layout.scenario_dir(key)),
            runs={k.value: RunRef.of(r) for k, r in group.items()},
            power_in_tree=RunKind.POWER in group and place.official_power(group[RunKind.POWER])))
        used.setdefault(bench_name, []).extend(group.values())
    if index.results:
        _submitter_files(request, layout, index, systems, benchmarks, used)
    return _finish(request, index, staging)


def _group(runs: Iterable[StoredRun], accuracy_misses: bool
           ) -> dict[tuple[str, str, str], ResultRuns]:
    groups: dict[tuple[str, str, str], ResultRuns] = {}
    for run in latest_attempts(runs, accuracy_misses=accuracy_misses):
        spec = run.spec
        groups.setdefault((spec.host, spec.benchmark, spec.scenario.value), {})[spec.kind] = run
    return groups


def _missing(request: TreeRequest, bench: BenchmarkInput, group: ResultRuns) -> list[str]:
    """The run kinds a result still lacks a passing attempt of."""
    needed = [] if {RunKind.PERFORMANCE, RunKind.POWER} & group.keys() else ["performance"]
    needed += [] if RunKind.ACCURACY in group else ["accuracy"]
    return needed + [t for t in request.tests_for(bench.model) if RunKind(t) not in group]


def _skip_reason(missing: list[str], why: list[str]) -> str:
    text = (f"no passing {', '.join(missing)} run, so the result is left out of the tree "
            "(without it the checker fails or crashes on the result)")
    return text + (". Latest attempts: " + "; ".join(why) if why else "")


def _reason(run: StoredRun) -> str:
    verdict = run.record.verdict
    return (verdict.reason if verdict else run.record.error) or run.record.state


def _model_dir(request: TreeRequest, bench: BenchmarkInput) -> str:
    if bench.open_name and request.division != "open":
        raise ConfigError(f"Benchmark '{bench.name}' is an open-division model "
                          f"('{bench.open_name}', mapped to {bench.model}); it cannot enter the "
                          f"{request.division} division. Run the campaign with `division: open`, "
                          "or use a benchmark that implements the official model.")
    return bench.open_name if request.division == "open" and bench.open_name else bench.model


def _benchmark(benchmarks: Mapping[str, BenchmarkInput], name: str) -> BenchmarkInput:
    if name not in benchmarks:
        raise ConfigError(f"Runs of benchmark '{name}' are in the run store, but no manifest "
                          f"was given for it (known: {', '.join(sorted(benchmarks)) or 'none'}). "
                          f"Check that images/{name}/benchmark.yaml exists.")
    return benchmarks[name]


def _system(systems: Mapping[str, SystemInput], host: str) -> SystemInput:
    if host not in systems:
        raise ConfigError(f"Host '{host}' has runs but no system description; the checker "
                          "crashes on a results folder without systems/<id>.json. Run "
                          f"`subrun describe {host}` (or the campaign's describe step) first.")
    return systems[host]


def _submitter_files(request: TreeRequest, layout: Layout, index: TreeIndex,
                     systems: Mapping[str, SystemInput], benchmarks: Mapping[str, BenchmarkInput],
                     used: Mapping[str, list[StoredRun]]) -> None:
    hosts = {r.host for r in index.results}
    for host in sorted(hosts):
        system = systems[host]
        place.system(layout, system, request.division, request.submitter)
    for name, runs in sorted(used.items()):
        bench = benchmarks[name]
        index.warnings += place.source(layout, bench, runs)
    if request.division == "closed":
        _write(layout.calibration_md, documents.calibration_md(request.submitter))
    mapping = {b.open_name: b.model for n, b in sorted(benchmarks.items())
               if n in used and b.open_name and b.open_name != b.model}
    if request.division == "open" and mapping:
        _write(layout.model_mapping_json, json.dumps(mapping, indent=2, sort_keys=True) + "\n")


def _finish(request: TreeRequest, index: TreeIndex, staging: Path) -> TreeIndex:
    if index.results:
        index.warnings += place.tidy(staging)
        swap.swap_in(staging, request.root)  # the old tree, now at staging, is removed after
    else:
        index.warnings.append(f"no result had all its runs passing: {request.root} was not "
                              "written (an earlier tree there, if any, is left as it was)")
    write_index(index)
    return index


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
