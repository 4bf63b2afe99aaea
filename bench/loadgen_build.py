"""Which round an installed LoadGen build is for, found from the seeds it actually logs.

The seeds come from the mlperf.conf compiled into LoadGen, so the LoadGen release decides which
round a log can be submitted to (checker.md §4.3). `probe_loadgen` runs a tiny real test with the
given Python interpreter in an empty temporary directory (so no stray audit.config applies) and
reads version and seeds from its detail log; the answer is cached per interpreter and build.
`require_loadgen_round` refuses a mismatch before any run starts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bench.loadgen_log import read_detail
from bench.rules import Seeds, load_rules, round_of_seeds
from lab.errors import CommandTimedOut, ConfigError, RunError
from lab.local import LocalHost

CACHE_DIR = Path(os.environ.get("SUBRUN_CACHE_DIR", Path.home() / ".cache" / "subrun"))

_PROBE = """
import sys
import mlperf_loadgen as lg
def issue(samples):
    lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])
sut = lg.ConstructSUT(issue, lambda: None)
qsl = lg.ConstructQSL(8, 8, lambda _: None, lambda _: None)
open("user.conf", "w").write(
    "*.Offline.min_duration = 0\\n*.Offline.min_query_count = 1\\n*.Offline.target_qps = 1\\n")
settings = lg.TestSettings()
settings.scenario = lg.TestScenario.Offline
settings.mode = lg.TestMode.PerformanceOnly
settings.FromConfig("user.conf", "probe", "Offline")
logs = lg.LogSettings()
logs.log_output.outdir = "."
logs.log_output.copy_summary_to_stdout = False
lg.StartTestWithLogSettings(sut, qsl, settings, logs)
lg.DestroyQSL(qsl)
lg.DestroySUT(sut)
"""


class LoadgenBuild(BaseModel):
    """A LoadGen build as its own log describes it."""

    model_config = ConfigDict(frozen=True)

    python: str
    version: str  # e.g. "6.0.17 @ d6147c7eb7"
    seeds: Seeds

    @property
    def round(self) -> str | None:
        """The round whose official seeds this build logs, or None."""
        return round_of_seeds(self.seeds)


def probe_loadgen(python: str = sys.executable, *, timeout_s: float = 60.0) -> LoadgenBuild:
    """Version and seeds of the mlperf_loadgen that `python` imports (cached)."""
    cached = _cache_file(python)
    if cached and cached.is_file():
        try:
            return LoadgenBuild.model_validate_json(cached.read_text())
        except (ValidationError, OSError):
            pass  # a damaged cache entry is just probed again
    build = _probe(python, timeout_s)
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(build.model_dump_json())
        tmp.replace(cached)
    return build


def require_loadgen_round(round_name: str, python: str = sys.executable) -> LoadgenBuild:
    """The LoadGen build, if its seeds are those of round_name; ConfigError otherwise."""
    rules = load_rules(round_name)
    build = probe_loadgen(python)
    if build.seeds == rules.seeds:
        return build
    found = f"the seeds of {build.round}" if build.round else "seeds of no known round"
    release = (f"mlcommons-loadgen=={rules.loadgen_release}" if rules.loadgen_release
               else f"a LoadGen release built for {round_name}")
    raise ConfigError(
        f"The LoadGen used by {python} (version {build.version}) logs {found} "
        f"(qsl_rng_seed {build.seeds.qsl_rng_seed}), but the campaign's round is {round_name}, "
        f"whose qsl_rng_seed is {rules.seeds.qsl_rng_seed}. Every run would fail the checker's "
        f"seed check. Install {release}, or set the campaign's round to "
        f"{build.round or 'the round this LoadGen was built for'}.")


@cache
def _probe(python: str, timeout_s: float) -> LoadgenBuild:
    with tempfile.TemporaryDirectory(prefix="subrun-loadgen-probe-") as tmp:
        try:
            done = LocalHost("controller", tmp).run([python, "-c", _PROBE], check=False,
                                                    timeout_s=timeout_s, cwd=tmp)
        except (OSError, CommandTimedOut) as e:
            raise RunError(f"Could not run {python} to probe LoadGen: {e}.") from e
        if not done.ok:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ConfigError(
                f"{python} could not run a LoadGen test: {' / '.join(tail)}. Install "
                "mlcommons-loadgen for that interpreter (pip install mlcommons-loadgen).")
        log = read_detail(Path(tmp) / "mlperf_log_detail.txt")
    if log.seeds is None:
        raise RunError(f"The LoadGen probe run with {python} logged no seeds; LoadGen "
                       f"{log.loadgen_version} is not one subrun can judge.")
    return LoadgenBuild(python=python, version=log.loadgen_version, seeds=log.seeds)


def _cache_file(python: str) -> Path | None:
    """A cache path keyed by interpreter and LoadGen binary, for the running interpreter only."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return None
    spec = importlib.util.find_spec("mlperf_loadgen")
    if spec is None or not spec.origin:
        return None
    stat = os.stat(spec.origin)
    ident = json.dumps([os.path.realpath(python), spec.origin, stat.st_size, stat.st_mtime_ns])
    return CACHE_DIR / f"loadgen-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"
