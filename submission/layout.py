"""Where everything goes in a submission tree: the only module that builds paths into it.

Two styles (reference/checker.md §1):
- v6 (rounds v6.0 and later, the default): everything of a result lives under
  `results/<system>/<model>/<scenario>/`, including measurements.json, user.conf, README.md and
  the TESTxx folders; the code folder is `src/`.
- v5 (rounds v5.0, v5.1): the measurements JSON (`<system>_<impl>_<scenario>.json`), user.conf and
  README.md live under `measurements/`, the TESTxx folders under `compliance/`, code under `code/`.

The folder rules at the bottom are the exact file sets the checkers expect in each folder
(§1.1, §5.1, §6.5, §8.5); the prechecks compare a tree against them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from lab.names import path_part

DIVISIONS = ("closed", "open", "network")
SCENARIOS = ("SingleStream", "MultiStream", "Offline", "Server", "Interactive")
SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"
ACCURACY_JSON = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
SPL = "spl.txt"
POWER_FILES = ("client.json", "client.log", "ptd_logs.txt", "server.json", "server.log")
VERIFY_ACCURACY = "verify_accuracy.txt"
VERIFY_PERFORMANCE = "verify_performance.txt"
VERIFY_OUTPUT_LEN = "verify_output_len.txt"
ANALYZER_TABLE = "analyzer_table.md"
POWER_SETTINGS = "power_settings.md"
# files_diff() in the checker always tolerates these three; we never write them
TOLERATED = frozenset({"mlperf_log_trace.json", "results.json", ".gitkeep"})


class Style(StrEnum):
    V6 = "v6"
    V5 = "v5"


@dataclass(frozen=True, order=True)
class ResultKey:
    """One result of the tree: a system, an official model (or open name) and a scenario."""

    system: str
    model: str
    scenario: str  # folder name, e.g. "Offline"

    def __post_init__(self) -> None:
        for what in ("system", "model", "scenario"):
            path_part(getattr(self, what), what)


@dataclass(frozen=True)
class Layout:
    """Paths of one `<division>/<submitter>` in a tree rooted at root."""

    root: Path
    division: str
    submitter: str
    style: Style = Style.V6

    def __post_init__(self) -> None:
        path_part(self.division, "division")
        path_part(self.submitter, "submitter")

    @property
    def division_dir(self) -> Path:
        """<root>/<division>."""
        return self.root / self.division

    @property
    def submitter_dir(self) -> Path:
        """<division>/<submitter>."""
        return self.division_dir / self.submitter

    @property
    def systems_dir(self) -> Path:
        """systems/, one description JSON per system."""
        return self.submitter_dir / "systems"

    def system_json(self, system: str) -> Path:
        """systems/<system>.json, the system description the checker loads for results/<system>."""
        return self.systems_dir / f"{path_part(system, 'system')}.json"

    def system_power_yaml(self, system: str) -> Path:
        """systems/<system>_power.yaml, the optional nameplate power file of v6.1."""
        return self.systems_dir / f"{path_part(system, 'system')}_power.yaml"

    @property
    def src_dir(self) -> Path:
        """src/ (v6) or code/ (v5): the implementation's source."""
        return self.submitter_dir / ("src" if self.style is Style.V6 else "code")

    def src_benchmark_dir(self, model: str, benchmark: str) -> Path:
        """Where a benchmark's build context goes (v5.1 wanted code/<model>/<implementation>)."""
        benchmark = path_part(benchmark, "benchmark")
        if self.style is Style.V6:
            return self.src_dir / benchmark
        return self.src_dir / path_part(model, "model") / benchmark

    @property
    def calibration_md(self) -> Path:
        """documentation/calibration.md, which the closed division asks for."""
        return self.submitter_dir / "documentation" / "calibration.md"

    @property
    def model_mapping_json(self) -> Path:
        """model_mapping.json: open-division model names to official ones."""
        return self.submitter_dir / "model_mapping.json"

    @property
    def results_dir(self) -> Path:
        """results/, one folder per system."""
        return self.submitter_dir / "results"

    def system_results_dir(self, system: str) -> Path:
        """results/<system>."""
        return self.results_dir / path_part(system, "system")

    def scenario_dir(self, key: ResultKey) -> Path:
        """results/<system>/<model>/<scenario>: performance and accuracy logs live here."""
        return self.results_dir / key.system / key.model / key.scenario

    def measurement_dir(self, key: ResultKey) -> Path:
        """The folder holding measurements JSON, user.conf and README.md."""
        if self.style is Style.V6:
            return self.scenario_dir(key)
        return self.submitter_dir / "measurements" / key.system / key.model / key.scenario

    def measurements_json(self, key: ResultKey, implementation: str) -> Path:
        """measurements.json (v6), or <system>_<implementation>_<scenario>.json (v5)."""
        if self.style is Style.V6:
            return self.measurement_dir(key) / "measurements.json"
        return self.measurement_dir(key) / f"{key.system}_{implementation}_{key.scenario}.json"

    def user_conf(self, key: ResultKey) -> Path:
        """The user.conf of a result's performance run."""
        return self.measurement_dir(key) / "user.conf"

    def readme(self, key: ResultKey) -> Path:
        """The README.md that says how to reproduce a result."""
        return self.measurement_dir(key) / "README.md"

    def performance_dir(self, key: ResultKey) -> Path:
        """performance/ of a result."""
        return self.scenario_dir(key) / "performance"

    def run_1(self, key: ResultKey) -> Path:
        """performance/run_1: the performance (or power testing) run's logs."""
        return self.performance_dir(key) / "run_1"

    def ranging(self, key: ResultKey) -> Path:
        """performance/ranging: the power ranging run's logs and samples."""
        return self.performance_dir(key) / "ranging"

    def power(self, key: ResultKey) -> Path:
        """performance/power: the power client's and server's files."""
        return self.performance_dir(key) / "power"

    def accuracy_dir(self, key: ResultKey) -> Path:
        """accuracy/ of a result."""
        return self.scenario_dir(key) / "accuracy"

    def compliance_dir(self, key: ResultKey) -> Path:
        """The folder that holds TEST01, TEST04, ... for one result."""
        if self.style is Style.V6:
            return self.scenario_dir(key)
        return self.submitter_dir / "compliance" / key.system / key.model / key.scenario

    def test_dir(self, key: ResultKey, test: str) -> Path:
        """TESTxx/ of a result."""
        return self.compliance_dir(key) / test

    def test_run_1(self, key: ResultKey, test: str) -> Path:
        """TESTxx/performance/run_1: the compliance run's logs."""
        return self.test_dir(key, test) / "performance" / "run_1"

    def test_accuracy_dir(self, key: ResultKey, test: str) -> Path:
        """TESTxx/accuracy: the compliance run's (truncated) accuracy log."""
        return self.test_dir(key, test) / "accuracy"

    def result_keys(self) -> list[ResultKey]:
        """Every results/<system>/<model>/<scenario> folder present, sorted."""
        keys = []
        for system in _subdirs(self.results_dir):
            for model in _subdirs(system):
                keys += [ResultKey(system.name, model.name, s.name) for s in _subdirs(model)]
        return sorted(keys)

    def relative(self, path: Path) -> str:
        """A tree path as shown to people: relative to the tree root."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def find_layouts(root: Path, style: Style = Style.V6) -> Iterator[Layout]:
    """Every `<division>/<submitter>` present under root, the way the checker walks it."""
    for division in _subdirs(root):
        if division.name in DIVISIONS:
            for submitter in _subdirs(division):
                yield Layout(root, division.name, submitter.name, style)


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []


# ---- the exact file sets, per folder of a result ----------------------------------------------

@dataclass(frozen=True)
class FolderRule:
    """The files a folder must hold (required), may hold (optional), and the folders under it."""

    required: frozenset[str]
    optional: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()

    def mismatch(self, files: set[str]) -> tuple[set[str], set[str]]:
        """(missing, unexpected) file names, with the checker's tolerated names ignored."""
        missing = set(self.required) - files
        unexpected = files - self.required - self.optional - TOLERATED
        return missing, unexpected


def _rule(required: tuple[str, ...], optional: tuple[str, ...] = (),
          folders: tuple[str, ...] = ()) -> FolderRule:
    return FolderRule(frozenset(required), frozenset(optional), frozenset(folders))


LOGS = (SUMMARY, DETAIL)
TESTS = ("TEST01", "TEST04", "TEST05", "TEST06", "TEST07", "TEST08", "TEST09")
MEASUREMENT_FILES = ("user.conf", "README.md")
# keyed by the folder's path relative to the compliance dir / scenario dir
FOLDER_RULES: dict[str, FolderRule] = {
    "performance": _rule((), folders=("run_1", "ranging", "power")),
    "performance/run_1": _rule(LOGS, (ACCURACY_JSON,)),
    "performance/run_1+power": _rule((*LOGS, SPL), (ACCURACY_JSON,)),
    "performance/ranging": _rule((*LOGS, SPL), (ACCURACY_JSON,)),
    "performance/power": _rule(POWER_FILES),
    "accuracy": _rule((*LOGS, ACCURACY_TXT, ACCURACY_JSON), folders=("images", "videos")),
    "TEST01": _rule((VERIFY_ACCURACY, VERIFY_PERFORMANCE), folders=("accuracy", "performance")),
    "TEST01/accuracy": _rule((ACCURACY_JSON, ACCURACY_TXT),
                             ("baseline_accuracy.txt", "compliance_accuracy.txt")),
    "TEST04": _rule((VERIFY_PERFORMANCE,), folders=("performance",)),
    "TEST05": _rule((VERIFY_PERFORMANCE,), folders=("performance",)),
    "TEST06": _rule((VERIFY_ACCURACY,), folders=("accuracy",)),
    "TEST06/accuracy": _rule((ACCURACY_JSON,), (ACCURACY_TXT,)),
    "TEST07": _rule((VERIFY_ACCURACY,), folders=("accuracy", "performance")),
    "TEST07/accuracy": _rule((ACCURACY_JSON,), (ACCURACY_TXT,)),
    "TEST08": _rule((VERIFY_ACCURACY,)),
    "TEST09": _rule((VERIFY_OUTPUT_LEN,), folders=("accuracy", "performance")),
    "TEST09/accuracy": _rule((ACCURACY_JSON,), (ACCURACY_TXT,)),
    **{f"TEST0{n}/performance": _rule((), folders=("run_1",)) for n in (1, 4, 5, 7, 9)},
    **{f"TEST0{n}/performance/run_1": _rule(LOGS, (ACCURACY_JSON,)) for n in (1, 4, 5, 7, 9)},
}


def scenario_rule(style: Style, *, power: bool) -> FolderRule:
    """The files of results/<system>/<model>/<scenario> itself."""
    files = ("measurements.json", *MEASUREMENT_FILES) if style is Style.V6 else ()
    optional = ("mlperf.conf", ANALYZER_TABLE, POWER_SETTINGS) if power else ("mlperf.conf",)
    folders = ("performance", "accuracy") + (TESTS if style is Style.V6 else ())
    return _rule(files, optional if style is Style.V6 else (), folders)


def measurement_rule(implementation_json: str, *, power: bool) -> FolderRule:
    """The files of measurements/<system>/<model>/<scenario> (v5 style)."""
    optional = ("mlperf.conf", ANALYZER_TABLE, POWER_SETTINGS) if power else ("mlperf.conf",)
    return _rule((implementation_json, *MEASUREMENT_FILES), optional)


def compliance_rule() -> FolderRule:
    """The files of compliance/<system>/<model>/<scenario> (v5 style): test folders only."""
    return _rule((), folders=TESTS)
