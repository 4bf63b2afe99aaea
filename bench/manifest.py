"""The benchmark contract: `images/<name>/benchmark.yaml`, as a strict model.

A manifest says which official benchmark the image implements (or, in the open division, what
its model is called and which official benchmark it maps to), which scenarios it serves, how to
start a run and how to score an accuracy run inside the container, what datasets and models it
needs and their checksums, default LoadGen settings per scenario, and how its image is built.

The run and score commands are argv templates. Inside each element, these placeholders are
replaced (and nothing else is): {scenario} (SingleStream, MultiStream, Offline, Server,
Interactive), {mode} (PerformanceOnly or AccuracyOnly), {run_dir} (the container's cwd, holding
user.conf and, for compliance runs only, audit.config), {user_conf}, {output_dir} (where LoadGen's
logs and accuracy.txt go), {dataset_dir} and {model_dir} (the container paths of the read-only
mounts the manifest declares under `mounts:`).

An optional `native:` section lets the benchmark run on hosts without Docker (hosts.yaml
`docker: {engine: false}`): `setup` lists the steps its Dockerfile runs at build time (argv
templates, {dataset_dir} and {model_dir} allowed), and `paths` maps each image path those steps
and the run command use (e.g. /opt/model) to a folder of the native environment (e.g. model).
Natively, every such path in an argv is replaced by its folder, as is the run directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
    field_validator,
    model_validator,
)

from bench.run import OUTPUT_DIR, RUN_MOUNT, RunKind, Scenario, Setting
from lab.errors import ConfigError
from lab.images import ImageSpec, find_images_dir
from lab.native import RESERVED
from lab.yamlfile import load_model

MANIFEST = "benchmark.yaml"
PLACEHOLDERS = ("scenario", "mode", "run_dir", "user_conf", "output_dir", "dataset_dir",
                "model_dir")
_FIELD = re.compile(r"\{([^{}]*)\}")
ContainerPath = Annotated[str, StringConstraints(pattern=r"^/[^\s]*$")]
_CHECKSUM = re.compile(r"^(md5:[0-9a-f]{32}|sha256:[0-9a-f]{64})$")


def _checksum(value: str) -> str:
    if not _CHECKSUM.match(value):
        raise ValueError("a checksum is 'md5:<32 hex digits>' or 'sha256:<64 hex digits>', "
                         f"lower case (got {value!r})")
    return value


Checksum = Annotated[str, AfterValidator(_checksum)]
ModelName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
MEASUREMENT_KEYS = Literal["input_data_types", "retraining", "starting_weights_filename",
                           "weight_data_types", "weight_transformations"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OpenModel(Strict):
    """An open-division model: its own name, and the official benchmark it is measured as."""

    model: ModelName  # the name in the submission tree
    maps_to: ModelName  # the official benchmark (model_mapping.json), e.g. resnet


class Mounts(Strict):
    """Container paths of the read-only mounts a run needs; hosts.yaml maps them to host dirs."""

    dataset_dir: ContainerPath | None = None
    model_dir: ContainerPath | None = None


class Asset(Strict):
    """A file a run depends on, with its published checksum."""

    name: str
    location: Literal["dataset_dir", "model_dir", "image"]
    path: str  # relative to the mount, or absolute inside the image for location: image
    checksum: Checksum  # "md5:<hex>" or "sha256:<hex>"
    optional: bool = False  # verified when present; its absence is not an error
    source: str = ""  # where it is published

    @model_validator(mode="after")
    def _path_fits_location(self) -> Asset:
        if self.location == "image" and not self.path.startswith("/"):
            raise ValueError(f"asset '{self.name}' lives in the image, so its path must be "
                             f"absolute (got '{self.path}')")
        if self.location != "image" and (self.path.startswith("/") or ".." in self.path):
            raise ValueError(f"asset '{self.name}' path must be relative to {{{self.location}}} "
                             f"(got '{self.path}')")
        return self

    @property
    def algorithm(self) -> str:
        return self.checksum.split(":", 1)[0]

    @property
    def digest(self) -> str:
        return self.checksum.split(":", 1)[1]


class ScenarioDefaults(Strict):
    """Default LoadGen settings of one scenario, written into user.conf unless overridden."""

    target_qps: PositiveFloat | None = None  # Offline, Server: the expected throughput
    target_latency_ms: PositiveFloat | None = None  # SS/MS: expected latency; Server: the bound
    samples_per_query: PositiveInt | None = None
    max_async_queries: PositiveInt | None = None

    def user_conf(self) -> dict[str, Setting]:
        """These defaults as user.conf keys."""
        keys = {"target_qps": self.target_qps, "target_latency": self.target_latency_ms,
                "samples_per_query": self.samples_per_query,
                "max_async_queries": self.max_async_queries}
        return {key: value for key, value in keys.items() if value is not None}


class BuildSettings(Strict):
    """How the image is built (see lab.images)."""

    parent: ModelName | None = "base"  # a folder under images/ this image builds FROM
    base_image: str = "python:3.11-slim"  # the external image the chain starts from
    requirements: str | None = "requirements.txt"
    python: Annotated[str, StringConstraints(pattern=r"^3\.\d+$")] = "3.11"
    args: dict[str, str] = Field(default_factory=dict)


class Submission(Strict):
    """What the submission tree says about this implementation."""

    implementation: str = "reference"
    measurements: dict[MEASUREMENT_KEYS, str] = Field(default_factory=dict)
    notes: str = ""


ArgvTemplate = Annotated[list[str], Field(min_length=1)]
ComplianceDerate = dict[Literal["TEST01", "TEST04", "TEST05"],
                        Annotated[float, Field(gt=0.5, le=1.0, strict=True)]]
EnvFolder = Annotated[str, StringConstraints(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$")]
RUN_ONLY = ("scenario", "mode", "run_dir", "user_conf", "output_dir")


class NativeSetup(Strict):
    """How the benchmark runs without Docker: its build-time steps and the image paths mapped."""

    setup: list[ArgvTemplate] = Field(default_factory=list)  # run once, in the environment
    paths: dict[ContainerPath, EnvFolder] = Field(default_factory=dict)  # image path -> folder

    @field_validator("paths")
    @classmethod
    def _folders(cls, paths: dict[str, str]) -> dict[str, str]:
        for image, folder in paths.items():
            if image.rstrip("/") == "":
                raise ValueError("`/` cannot be mapped; name the image folder, e.g. /opt/model")
            if folder.split("/")[0] in RESERVED:
                raise ValueError(f"folder '{folder}' (for {image}) is the environment's own; "
                                 f"use another name than {', '.join(sorted(RESERVED))}")
        return paths


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


class Manifest(Strict):
    """The whole of images/<name>/benchmark.yaml."""

    name: ModelName
    description: str = ""
    kind: Literal["inference"] = "inference"  # `kind: training`: bench.training_manifest
    model: ModelName | None = None  # closed division: the official model name
    open: OpenModel | None = None
    loadgen_model: ModelName  # the model's key in mlperf.conf and user.conf, e.g. resnet50
    scenarios: list[Scenario] = Field(min_length=1)
    dataset_size: PositiveInt  # the samples an accuracy run covers
    performance_sample_count: PositiveInt
    run: ArgvTemplate
    score: ArgvTemplate
    verify: ArgvTemplate | None = None  # a dataset/model check run in the image before runs
    mounts: Mounts = Field(default_factory=Mounts)
    assets: list[Asset] = Field(default_factory=list)
    defaults: dict[Scenario, ScenarioDefaults] = Field(default_factory=dict)
    build: BuildSettings = Field(default_factory=BuildSettings)
    submission: Submission = Field(default_factory=Submission)
    native: NativeSetup | None = None  # absent: the benchmark runs only in its image
    # Server audits at a share of the target QPS, as submitters run them: {TEST01: 0.96}
    compliance_derate: ComplianceDerate = Field(default_factory=dict)

    @field_validator("scenarios")
    @classmethod
    def _unique(cls, scenarios: list[Scenario]) -> list[Scenario]:
        if len(set(scenarios)) != len(scenarios):
            raise ValueError("a scenario is listed twice")
        return scenarios

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if (self.model is None) == (self.open is None):
            raise ValueError("give exactly one of `model:` (closed division: the official model "
                             "name) or `open: {model: ..., maps_to: ...}`")
        for key, template in (("run", self.run), ("score", self.score),
                              ("verify", self.verify or [])):
            self._check_template(key, template)
        for asset in self.assets:
            if asset.location != "image" and getattr(self.mounts, asset.location) is None:
                raise ValueError(f"asset '{asset.name}' is in {asset.location}, but "
                                 f"`mounts.{asset.location}` is not set")
        extra = [s.value for s in self.defaults if s not in self.scenarios]
        if extra:
            raise ValueError(f"defaults given for {', '.join(extra)}, which `scenarios` lacks")
        if self.native:
            self._check_native(self.native)
        return self

    def _check_native(self, native: NativeSetup) -> None:
        for template in native.setup:
            self._check_template("native.setup", template)
            used = [n for element in template for n in _FIELD.findall(element) if n in RUN_ONLY]
            if used:
                raise ValueError(f"`native.setup` uses {{{used[0]}}}, which only a run has; "
                                 "setup steps run once, when the environment is made")
        mounted = [RUN_MOUNT, *(p for p in (self.mounts.dataset_dir, self.mounts.model_dir) if p)]
        for image in native.paths:
            clash = next((m for m in mounted if _overlaps(image, m)), None)
            if clash:
                raise ValueError(f"`native.paths` maps {image}, which overlaps {clash}, a path "
                                 "subrun maps itself (run directory or mounts)")

    def _check_template(self, key: str, template: list[str]) -> None:
        for element in template:
            for name in _FIELD.findall(element):
                if name not in PLACEHOLDERS:
                    raise ValueError(f"`{key}` uses {{{name}}}, which is not a placeholder; "
                                     f"known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
                if name in ("dataset_dir", "model_dir") and getattr(self.mounts, name) is None:
                    raise ValueError(f"`{key}` uses {{{name}}}, but `mounts.{name}` is not set")

    # --- what the other layers ask of a manifest ------------------------------------------

    @property
    def official_model(self) -> str:
        """The official benchmark the results count for (resnet, bert-99, ...)."""
        return self.open.maps_to if self.open else str(self.model)

    @property
    def tree_model(self) -> str:
        """The model's directory name in the submission tree."""
        return self.open.model if self.open else str(self.model)

    @property
    def division(self) -> Literal["closed", "open"]:
        return "open" if self.open else "closed"

    def model_mapping(self) -> dict[str, str]:
        """This benchmark's entry for open/<submitter>/model_mapping.json (empty if closed)."""
        return {self.open.model: self.open.maps_to} if self.open else {}

    def run_argv(self, scenario: Scenario, kind: RunKind) -> list[str]:
        """The command that starts one run of kind in scenario inside the container."""
        if scenario not in self.scenarios:
            raise ConfigError(f"Benchmark '{self.name}' does not serve {scenario.value}; it "
                              f"serves {', '.join(s.value for s in self.scenarios)}.")
        return self.render(self.run, scenario=scenario, mode=kind.loadgen_mode)

    def score_argv(self) -> list[str]:
        """The command that writes accuracy.txt from an accuracy run's log."""
        return self.render(self.score)

    def verify_argv(self) -> list[str] | None:
        return self.render(self.verify) if self.verify else None

    def native_setup_argvs(self) -> list[list[str]]:
        """The native setup steps with their placeholders filled in (image paths)."""
        return [self.render(t) for t in self.native.setup] if self.native else []

    def render(self, template: list[str], *, scenario: Scenario | None = None,
               mode: str | None = None) -> list[str]:
        """template with its placeholders filled in (scenario and mode only when given)."""
        values = {"run_dir": RUN_MOUNT, "user_conf": f"{RUN_MOUNT}/user.conf",
                  "output_dir": f"{RUN_MOUNT}/{OUTPUT_DIR}",
                  "dataset_dir": self.mounts.dataset_dir or "",
                  "model_dir": self.mounts.model_dir or ""}
        if scenario is not None:
            values["scenario"] = scenario.value
        if mode is not None:
            values["mode"] = mode

        def fill(match: re.Match[str]) -> str:
            if match.group(1) not in values:
                raise ConfigError(f"Benchmark '{self.name}': {{{match.group(1)}}} has no value "
                                  "in this command (it is only known for a run).")
            return values[match.group(1)]

        return [_FIELD.sub(fill, element) for element in template]

    def user_conf_defaults(self, scenario: Scenario) -> dict[str, Setting]:
        """Default user.conf settings of scenario (empty when the manifest gives none)."""
        defaults = self.defaults.get(scenario)
        return defaults.user_conf() if defaults else {}

    def image_spec(self, images_dir: Path | None = None) -> ImageSpec:
        """How to build this benchmark's image, its parent chain included."""
        return image_spec(self.name, self.build, images_dir)


def image_spec(name: str, build: BuildSettings, images_dir: Path | None = None) -> ImageSpec:
    """How to build images/<name> under build, its parent chain included (any benchmark kind)."""
    root = images_dir or find_images_dir()
    parent = None
    if build.parent:
        folder = root / build.parent
        if not folder.is_dir():
            raise ConfigError(f"{root / name / MANIFEST}: build.parent "
                              f"'{build.parent}' is not a folder under {root}.")
        parent = ImageSpec(build.parent, folder, base_image=build.base_image,
                           python=build.python)
    return ImageSpec(name, root / name, parent=parent,
                     base_image=None if parent else build.base_image,
                     requirements=build.requirements, python=build.python,
                     build_args=tuple(sorted(build.args.items())))


def load_manifest(name: str, images_dir: Path | None = None) -> Manifest:
    """Load and validate images/<name>/benchmark.yaml, or raise ConfigError naming the field."""
    root = images_dir or find_images_dir()
    path = root / name / MANIFEST
    if not path.is_file():
        known = list_benchmarks(root)
        import difflib

        guess = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean '{guess[0]}'?" if guess else f"known: {', '.join(known) or 'none'}"
        where = (f" Benchmarks are read from $SUBRUN_IMAGES_DIR ({root}); unset it to use this "
                 "checkout's images/." if images_dir is None and os.environ.get(
                     "SUBRUN_IMAGES_DIR") else "")
        raise ConfigError(f"No benchmark '{name}': {path} does not exist ({hint}).{where}")
    manifest = load_model(path, Manifest)
    if manifest.name != name:
        raise ConfigError(f"{path}: name: '{manifest.name}' must equal its folder name '{name}'.")
    return manifest


def list_benchmarks(images_dir: Path | None = None) -> list[str]:
    """The benchmarks under images/: every folder holding a benchmark.yaml."""
    root = images_dir or find_images_dir()
    return sorted(p.parent.name for p in root.glob(f"*/{MANIFEST}"))
