"""The small text files of a tree: measurements JSON, user.conf, README.md, calibration, src info.

Each is a pure function of the runs and inputs, so the same campaign always writes the same
bytes (the tarball's digest is stable) and every file can be tested without a tree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from bench.run import Mode, RunKind, RunSpec
from lab.errors import ConfigError
from submission.inputs import MEASUREMENT_FIELDS, BenchmarkInput, StoredRun


def measurements_json(bench: BenchmarkInput) -> str:
    """measurements.json: the five fields the checker requires, all non-empty."""
    missing = [f for f in MEASUREMENT_FIELDS if not str(bench.measurements.get(f, "")).strip()]
    if missing:
        raise ConfigError(
            f"images/{bench.name}/benchmark.yaml: the measurements fields {', '.join(missing)} are "
            "missing or empty; the checker requires all of input_data_types, retraining, "
            "starting_weights_filename, weight_data_types, weight_transformations. Add them "
            "under `measurements:` in the manifest.")
    data = {f: str(bench.measurements[f]) for f in MEASUREMENT_FIELDS}
    extra = {k: str(v) for k, v in sorted(bench.measurements.items()) if k not in data}
    return json.dumps({**data, **extra}, indent=2) + "\n"


def user_conf(spec: RunSpec, model_key: str) -> str:
    """user.conf of a run from its settings; never empty, since the checker refuses empty ones."""
    lines = [f"# user.conf of {spec.label} (run {spec.key}); LoadGen's built-in mlperf.conf "
             "supplies everything else"]
    scenario = spec.scenario.loadgen
    lines += [f"{model_key}.{scenario}.{k} = {_conf_value(v)}"
              for k, v in sorted(spec.settings.items())]
    return "\n".join(lines) + "\n"


def _conf_value(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def calibration_md(submitter: str) -> str:
    """documentation/calibration.md: closed division asks for it; subrun writes the frame."""
    return (f"# Calibration and quantization: {submitter}\n\n"
            "The benchmarks in this submission were run with the weights named in each result's "
            "`measurements.json` (`starting_weights_filename`, `weight_transformations`). "
            "No post-training calibration beyond what those fields state was applied.\n\n"
            "Replace this paragraph with the calibration procedure and data set if the "
            "implementation quantizes or calibrates the model.\n")


def build_info(bench: BenchmarkInput, runs: Sequence[StoredRun]) -> str:
    """src/<benchmark>/BUILD_INFO.md: which version of the source and which images ran."""
    digests = sorted({r.spec.image_digest for r in runs if r.spec.image_digest})
    loadgen = sorted({r.spec.loadgen_version for r in runs if r.spec.loadgen_version})
    lines = [f"# {bench.name}", "",
             f"- Benchmark version: `{bench.version}`",
             f"- Model: `{bench.model}`" + (f" (open name `{bench.open_name}`)"
                                             if bench.open_name else ""),
             f"- Image digests used: {', '.join(f'`{d}`' for d in digests) or 'not recorded'}",
             f"- LoadGen: {', '.join(f'`{v}`' for v in loadgen) or 'not recorded'}", "",
             "Build contexts of the image chain (root first): "
             + ", ".join(f"`src/{name}`" for name, _ in bench.contexts) + ". `docker build` in "
             "each, in that order, rebuilds the image (each builds FROM the previous one)."]
    return "\n".join(lines) + "\n"


def readme(bench: BenchmarkInput, system_id: str, runs: Mapping[RunKind, StoredRun],
           model_dir: str) -> str:
    """README.md of one result: enough to reproduce every run that fed it."""
    main = runs.get(RunKind.POWER) or runs[RunKind.PERFORMANCE]
    spec = main.spec
    out = [f"# {model_dir} / {spec.scenario.value} on {system_id}", ""]
    if any(r.spec.mode is Mode.SHORT for r in runs.values()):
        out += ["**Short mode: these runs used shortened durations and counts; this result is "
                "not submittable.**", ""]
    out += [f"- Benchmark: `{bench.name}` version `{bench.version}` (source in `src/{bench.name}`)",
            f"- Model: `{spec.model}`, scenario `{spec.scenario.value}` (LoadGen scenario "
            f"`{spec.scenario.loadgen}`), round `{spec.round}`",
            f"- Host: `{spec.host}`, system description `systems/{system_id}.json`",
            f"- Image digest: `{spec.image_digest or 'not recorded'}`",
            f"- LoadGen: `{spec.loadgen_version or 'not recorded'}`"]
    if bench.notes:
        out += ["", bench.notes.strip()]
    out += ["", "## Runs", ""]
    for kind in sorted(runs, key=lambda k: list(RunKind).index(k)):
        out += _run_section(bench, kind, runs[kind])
    out += ["## Reproduce", "",
            "Run the same campaign with subrun (`subrun run campaign.yaml`), or start each run "
            "above with its command in the image of the listed digest, with `user.conf` (and, "
            "for a TEST run, the round's `audit.config`) in the working directory."]
    return "\n".join(out) + "\n"


def _run_section(bench: BenchmarkInput, kind: RunKind, run: StoredRun) -> list[str]:
    spec, record = run.spec, run.record
    out = [f"### {kind.value}", "",
           f"- Run key `{record.key}`, attempt {record.attempt}, started "
           f"{record.started_at.isoformat(timespec='seconds')}"]
    if record.verdict and record.verdict.metrics:
        shown = ", ".join(f"{k} = {v:g}" for k, v in sorted(record.verdict.metrics.items()))
        out.append(f"- Measured: {shown}")
    if spec.settings:
        out.append("- Settings: " + ", ".join(f"`{k} = {_conf_value(v)}`"
                                              for k, v in sorted(spec.settings.items())))
    command = bench.command(spec) if bench.command else ""
    if command:
        out += ["", "```", command, "```"]
    return [*out, ""]


def power_doc(name: str, run: StoredRun) -> str:
    """analyzer_table.md / power_settings.md when the power run did not store its own."""
    identity = _analyzer_identity(run)
    if name.startswith("analyzer_table"):
        return ("# Power analyzer\n\n| field | value |\n|---|---|\n"
                f"| analyzer | {identity or 'see performance/power/ptd_logs.txt'} |\n"
                f"| run | {run.spec.label} (key {run.record.key}) |\n"
                "| connection | as recorded in performance/power/server.json (ptd_config) |\n")
    return ("# Power settings\n\nRanging run in auto range, then the testing run with the "
            "ranges set from the ranging maxima; see performance/power/server.json for the "
            "exact commands sent to the analyzer.\n")


def _analyzer_identity(run: StoredRun) -> str:
    server = run.file("power/server.json")
    if server is None:
        return ""
    try:
        messages = json.loads(server.read_text()).get("ptd_messages", [])
    except (ValueError, AttributeError):
        return ""
    for entry in messages if isinstance(messages, list) else []:
        if isinstance(entry, dict) and str(entry.get("cmd", "")).startswith("Identify"):
            return str(entry.get("reply", ""))
    return ""
