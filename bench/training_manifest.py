"""A training benchmark: `images/<name>/benchmark.yaml` with `kind: training`, as a strict model.

It names the official Training benchmark (closed) or its own model and the benchmark it maps to
(open), the mlperf-logging ruleset it is judged under, the argv that trains one run with a given
seed and writes one mllog file, the quality target, and the hyperparameter that decides its
Reference Convergence Point (the global batch size). Placeholders in the argv: {seed},
{output_dir} (where the log goes), {run_dir}, {submitter}, {system} (the system's name: the
host), {division}, {benchmark} (the official name), {quality_target} and {global_batch_size}.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, StringConstraints, model_validator

from bench.manifest import (
    MANIFEST,
    ArgvTemplate,
    BuildSettings,
    ModelName,
    OpenModel,
    Strict,
    Submission,
    image_spec,
)
from bench.run import OUTPUT_DIR, RUN_MOUNT, RunSpec
from lab.errors import ConfigError
from lab.images import ImageSpec, find_images_dir
from lab.yamlfile import load_model

PLACEHOLDERS = ("seed", "output_dir", "run_dir", "submitter", "system", "division", "benchmark",
                "quality_target", "global_batch_size")
_FIELD = re.compile(r"\{([^{}]*)\}")
Ruleset = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")]


class Quality(Strict):
    """When a run has converged: the logged metric reaches the target."""

    metric: Literal["eval_accuracy"] = "eval_accuracy"
    target: float = Field(gt=0)


class TrainingManifest(Strict):
    """The whole of a training benchmark's benchmark.yaml."""

    name: ModelName
    kind: Literal["training"]
    description: str = ""
    benchmark: ModelName | None = None  # closed division: the official Training benchmark
    open: OpenModel | None = None  # open division: its model and the benchmark it maps to
    ruleset: Ruleset  # mlperf-logging's, e.g. 6.0.0
    run: ArgvTemplate
    log_file: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")] = "result.txt"
    quality: Quality
    global_batch_size: PositiveInt
    build: BuildSettings = Field(default_factory=BuildSettings)
    submission: Submission = Field(default_factory=Submission)

    @model_validator(mode="after")
    def _consistent(self) -> TrainingManifest:
        if (self.benchmark is None) == (self.open is None):
            raise ValueError("give exactly one of `benchmark:` (closed division: the official "
                             "Training benchmark) or `open: {model: ..., maps_to: ...}`")
        for element in self.run:
            for name in _FIELD.findall(element):
                if name not in PLACEHOLDERS:
                    raise ValueError(f"`run` uses {{{name}}}, which is not a placeholder; known: "
                                     f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        if not any("{seed}" in element for element in self.run):
            raise ValueError("`run` must pass the run's seed ({seed}): subrun draws a distinct "
                             "seed for every run")
        return self

    @property
    def official_model(self) -> str:
        """The official Training benchmark the results count for (dlrm_dcnv2, ...)."""
        return self.open.maps_to if self.open else str(self.benchmark)

    @property
    def division(self) -> Literal["closed", "open"]:
        return "open" if self.open else "closed"

    def train_argv(self, *, seed: int, submitter: str, system: str, division: str) -> list[str]:
        """The command that trains one run inside the container."""
        values = {"seed": str(seed), "output_dir": f"{RUN_MOUNT}/{OUTPUT_DIR}",
                  "run_dir": RUN_MOUNT, "submitter": submitter, "system": system,
                  "division": division, "benchmark": self.official_model,
                  "quality_target": repr(self.quality.target),
                  "global_batch_size": str(self.global_batch_size)}
        return [_FIELD.sub(lambda m: values[m.group(1)], element) for element in self.run]

    def image_spec(self, images_dir: Path | None = None) -> ImageSpec:
        """How to build this benchmark's image, its parent chain included."""
        return image_spec(self.name, self.build, images_dir)


def is_training(name: str, images_dir: Path | None = None) -> bool:
    """Whether images/<name>/benchmark.yaml declares `kind: training` (a line of its own)."""
    path = (images_dir or find_images_dir()) / name / MANIFEST
    if not path.is_file():
        return False
    return any(line.split("#")[0].strip() == "kind: training"
               for line in path.read_text(errors="replace").splitlines())


def load_training_manifest(name: str, images_dir: Path | None = None) -> TrainingManifest:
    """Load and validate a training benchmark.yaml, or raise ConfigError naming the field."""
    path = (images_dir or find_images_dir()) / name / MANIFEST
    if not path.is_file():
        raise ConfigError(f"No benchmark '{name}': {path} does not exist.")
    manifest = load_model(path, TrainingManifest)
    if manifest.name != name:
        raise ConfigError(f"{path}: name: '{manifest.name}' must equal its folder name '{name}'.")
    return manifest


def training_argv(manifest: TrainingManifest, spec: RunSpec) -> list[str]:
    """The command of one planned training run: its seed, submitter and division are in its
    settings (so in its key), its system is its host."""
    settings = spec.settings
    return manifest.train_argv(seed=int(settings["seed"]), submitter=str(settings["submitter"]),
                               system=spec.host, division=str(settings["division"]))
