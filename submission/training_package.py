"""The Training submission package: the one module that builds paths into it.

    <root>/<division>/<submitter>/
        systems/<system>.json
        benchmarks/<benchmark>/implementations/<implementation>/   the benchmark's source
        results/<system>/<benchmark>/result_<i>.txt                 one mllog file per run

as `mlperf_logging.package_checker <root>/<division>/<submitter> training <ruleset>` reads it:
results are found under the official benchmark's name (open division too), exactly the
ruleset's run count of `result_*.txt` per benchmark, nothing else beside them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.errors import SubrunError

_SKIP = {"__pycache__", "wheels", ".pytest_cache"}


@dataclass(frozen=True)
class Implementation:
    """One benchmark's code as it goes into benchmarks/<benchmark>/implementations/."""

    benchmark: str  # the official Training benchmark, e.g. dlrm_dcnv2
    name: str  # the implementation folder, e.g. numpy-logreg
    source_dir: Path  # copied whole (caches and fetched wheels left out)


@dataclass(frozen=True)
class SystemResults:
    """The submitted runs of one benchmark on one system, in the order they are numbered."""

    system: str
    benchmark: str
    logs: Sequence[Path]


def org_dir(root: Path, division: str, submitter: str) -> Path:
    """The folder the package checker and result_summarizer are pointed at."""
    return root / division / submitter


def result_dir(org: Path, system: str, benchmark: str) -> Path:
    return org / "results" / system / benchmark


def assemble_package(org: Path, systems: Mapping[str, Mapping[str, str]],
                     implementations: Sequence[Implementation],
                     results: Sequence[SystemResults]) -> Path:
    """Write the package afresh under org (anything there before is replaced); return org."""
    missing = sorted({r.system for r in results} - set(systems))
    if missing:
        raise SubrunError(f"No system description for {', '.join(missing)}: the package needs "
                          "systems/<system>.json for every system with results.")
    if org.exists():
        shutil.rmtree(org)
    (org / "systems").mkdir(parents=True)
    for system, fields in systems.items():
        (org / "systems" / f"{system}.json").write_text(json.dumps(fields, indent=2) + "\n")
    for impl in implementations:
        shutil.copytree(impl.source_dir,
                        org / "benchmarks" / impl.benchmark / "implementations" / impl.name,
                        ignore=lambda _d, names: [n for n in names if n in _SKIP])
    for entry in results:
        folder = result_dir(org, entry.system, entry.benchmark)
        folder.mkdir(parents=True, exist_ok=True)
        for i, log in enumerate(entry.logs):
            shutil.copyfile(log, folder / f"result_{i}.txt")
    return org
