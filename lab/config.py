"""The lab inventory (hosts.yaml) as strict models: hosts, power analyzers, the power director.

Secrets never live here: SSH keys are named by path, passwords come from the environment.
Paths are resolved against the directory of the file that names them.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ByteSize,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lab import cores, system_fields
from lab.docker_host import check_docker_host
from lab.names import HostName, folder_name
from lab.yamlfile import load_model

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
# strict: YAML's `true` is not port 1, nor the text '2_2' port 22
Port = Annotated[StrictInt, Field(ge=1, le=65535)]
DEFAULT_INVENTORY = Path(__file__).resolve().parent.parent / "hosts.yaml"


class Strict(BaseModel):
    """Base for every model a person writes: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _mount_path(value: str) -> str:
    """An absolute path that cannot add an option to docker's `--mount` (comma-separated CSV)."""
    if not value.startswith("/") or any(c in value for c in ',"') or not value.isprintable():
        raise ValueError(f"{value!r} must be an absolute path without commas, double quotes or "
                         "control characters (docker's --mount would read them as options)")
    return value


MountPath = Annotated[str, AfterValidator(_mount_path)]


def _cpuset(value: object) -> str:
    """`auto`, or a core list ("1-3", "0,2-3", [1, 2, 3]) in its canonical form."""
    if not isinstance(value, str | int | list):
        raise ValueError(f"{value!r} is not a core list; give e.g. \"1-3\", [1, 2, 3] or auto")
    return cores.normalized(value)


# the cores a host's runs are pinned to (`lab.cores`); absent: unpinned
CpuSet = Annotated[str, BeforeValidator(_cpuset)]
# top-level folders of the target's own system, never handed writable to a container
SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc",
                         "/root", "/run", "/sbin", "/sys", "/usr", "/var"})


class Mount(Strict):
    """A dataset or model directory on the target, mounted read-only into benchmark containers."""

    source: MountPath
    target: MountPath
    read_only: StrictBool = True

    @model_validator(mode="after")
    def _not_the_system(self) -> Mount:
        if not self.read_only and os.path.normpath(self.source) in SYSTEM_DIRS:
            raise ValueError(f"{self.source} is part of the host's own system and would be "
                             "writable by the container; mount a data folder instead, or keep "
                             "`read_only: true`")
        if os.path.normpath(self.target) == "/":
            raise ValueError("a mount cannot replace the container's `/`; pick a folder")
        return self


class DockerSettings(Strict):
    """How benchmark containers are provisioned and started on one host."""

    engine: bool = True
    docker_host: str | None = None  # DOCKER_HOST on the target, when not the default socket
    provision: Literal["build", "ship"] = "build"  # build on the target, or ship from controller
    base_image: str | None = None  # what benchmark images build FROM here (default: manifest's)
    gpus: Literal["all"] | list[Annotated[str, StringConstraints(
        pattern=r"^[A-Za-z0-9_:-]+$")]] | None = None
    shm_size: Annotated[str, StringConstraints(pattern=r"^\d+[bkmgBKMG]?$")] = "1g"
    ulimits: dict[Annotated[str, StringConstraints(pattern=r"^[a-z]+$")],
                  Annotated[StrictInt, Field(ge=-1)]] = Field(default_factory=dict)
    mounts: list[Mount] = Field(default_factory=list)
    # cores of its own for each run container (`--cpuset-cpus`, with the top CPU weight)
    cpuset: CpuSet | None = None

    @field_validator("docker_host")
    @classmethod
    def _private_engine(cls, value: str | None) -> str | None:
        if value is not None:
            check_docker_host(value)
        return value


class NativeSettings(Strict):
    """How benchmarks run on a host without Docker (`docker: {engine: false}`)."""

    python: str = "python3"  # the interpreter the benchmark's venv is made from
    cpuset: CpuSet | None = None  # cores of its own for each run (`taskset -c`)


class Limits(Strict):
    """What the controller accepts from a target it does not trust: the files one run may
    leave for collection, and the output it keeps of any one command (per stream, its end)."""

    collect_max_files: Annotated[StrictInt, Field(ge=1)] = 50_000
    collect_max_bytes: Annotated[ByteSize, Field(ge=1)] = ByteSize(64 * 1024**3)  # "64GiB"
    output_max_bytes: Annotated[ByteSize, Field(ge=1024)] = ByteSize(16 * 1024**2)  # "16MiB"


class HostPower(Strict):
    """How a host's power is measured: the analyzer (a name under `analyzers:`) on its feed.

    Said per host because only the analyzer wired to a machine's power supply measures it;
    reading another one gives a wrong number that looks like a measurement."""

    analyzer: Name


class HostConfig(Strict):
    """One target machine (a SUT), reached locally or over SSH."""

    name: Name
    transport: Literal["local", "ssh"] = "ssh"
    address: str | None = None
    port: Port = 22
    user: str | None = None
    key: Path | None = None
    ssh_alias: HostName | None = None  # checked: ~/.ssh/config may paste it into a shell
    known_hosts: Path | None = None
    trust_on_first_use: StrictBool = False
    work_dir: MountPath = "/var/tmp/subrun"  # run folders below it are mounted into containers
    labels: list[str] = Field(default_factory=list)
    # idle seconds before every run: one run's heat and caches stay out of the next
    # (the mobile rules' 5-minute cool-down is settle_s: 300)
    settle_s: float = Field(default=3.0, ge=0, le=3600, strict=True, allow_inf_nan=False)
    # how long one outage of an SSH link may last (reconnecting and reattaching the whole
    # time) before the host is given up for the campaign; its other hosts carry on
    outage_budget_s: float = Field(default=180.0, gt=0, le=86400, strict=True,
                                   allow_inf_nan=False)
    # training runs (each with its own seed) the host holds at once: above 1 a training set
    # holds the whole host for its duration; inference runs always run one at a time
    training_runs_at_once: int = Field(default=1, ge=1, le=64, strict=True)
    docker: DockerSettings = Field(default_factory=DockerSettings)
    native: NativeSettings = Field(default_factory=NativeSettings)
    limits: Limits = Field(default_factory=Limits)
    power: HostPower | None = None
    system: dict[str, str | int] = Field(default_factory=dict)

    @field_validator("key", "known_hosts")
    @classmethod
    def _resolve_path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        path = Path(os.path.expanduser(value))
        if not path.is_absolute() and info.context and "base_dir" in info.context:
            path = Path(info.context["base_dir"]) / path
        if info.field_name == "key" and not path.is_file():
            raise ValueError(f"no key file at {path}; set `key:` to an existing private key")
        return path

    @field_validator("system")
    @classmethod
    def _known_system_fields(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        _check_system_keys(value)
        return value

    @model_validator(mode="after")
    def _ssh_needs_address(self) -> HostConfig:
        if self.transport == "ssh" and not (self.address or self.ssh_alias):
            raise ValueError(
                f"host '{self.name}' uses transport ssh but has neither `address:` nor "
                "`ssh_alias:`; set one (or `transport: local` for this machine)"
            )
        return self

    @model_validator(mode="after")
    def _cpuset_where_runs_start(self) -> HostConfig:
        used, unused = ("docker", "native") if self.docker.engine else ("native", "docker")
        if getattr(self, unused).cpuset is not None:
            how = "in containers" if used == "docker" else "natively (`docker: {engine: false}`)"
            raise ValueError(f"host '{self.name}' runs benchmarks {how}, so `{unused}.cpuset` "
                             f"pins nothing; move it to `{used}: {{cpuset: ...}}`")
        return self


class AnalyzerConfig(Strict):
    """A power analyzer, behind a PTDaemon-protocol daemon on some host.

    subrun's daemon listens on loopback unless `listen:` says otherwise; beyond loopback it
    serves only peers that send the shared token, named here by `token_env:` (an environment
    variable on the controller) or `token_file:` (a file on the controller), never written
    into this file. A listen address beyond loopback without a token is refused here."""

    name: Name
    model: Literal["WT310", "WT310E", "WT333E"] = "WT310E"
    resource: str = "sim"  # "sim" (pyvisa-sim) or a VISA resource string
    host: str = "local"  # the host the daemon runs on
    port: Port = 8888
    token_env: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    token_file: Path | None = None
    # What subrun's daemon listens on: 127.0.0.1 (default), an address of its host, or 0.0.0.0
    listen: str = "127.0.0.1"
    # A client silent this long is dropped (one waiting out its own measurement is not)
    idle_timeout_s: float = Field(default=60.0, gt=0, le=86400)
    # How the controller reaches the daemon; default: `listen:`, or for 0.0.0.0 the host's
    # address (127.0.0.1 for a local host).
    address: str | None = None
    sim_file: Path | None = None  # a pyvisa-sim YAML of your own instead of the shipped one
    visa_library: str = ""  # pyvisa backend for a real instrument, e.g. "@py"; "" = default
    python: str | None = None  # Python with subrun on the daemon's host; default python3
    # For SPEC PTDaemon behind power-dev (the official path): PTDaemon's own device settings.
    device_type: StrictInt | None = None  # default: 49 for WT310/WT310E, 52 for WT333E
    device_port: str | None = None  # e.g. /dev/usbtmc0, or the serial number with -y
    interface_flag: Literal["", "-g", "-n", "-y", "-U"] = ""

    @field_validator("sim_file", "token_file")
    @classmethod
    def _resolve_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        path = Path(os.path.expanduser(value))
        if not path.is_absolute() and info.context and "base_dir" in info.context:
            path = Path(info.context["base_dir"]) / path
        if not path.is_file():
            what = "pyvisa-sim file" if info.field_name == "sim_file" else "token file"
            raise ValueError(f"no {what} at {path}; fix `{info.field_name}:` or remove it")
        return path

    @field_validator("listen")
    @classmethod
    def _listen_beyond_loopback_needs_token(cls, value: str, info: ValidationInfo) -> str:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"`listen: {value}` is not an IP address; give 127.0.0.1, an "
                             "address of the daemon's host, or 0.0.0.0 for all") from None
        if not address.is_loopback and not (info.data.get("token_env")
                                            or info.data.get("token_file")):
            raise ValueError(
                f"analyzer '{info.data.get('name', '?')}' would listen on {value}, beyond "
                "loopback, without a token, so anyone reaching it could start, stop and "
                "re-range its measurements; set `token_env:` (an environment variable holding "
                "a shared token) or `token_file:` on this analyzer, or remove `listen:`")
        return value

    @model_validator(mode="after")
    def _one_token_source(self) -> AnalyzerConfig:
        if self.token_env and self.token_file:
            raise ValueError(f"analyzer '{self.name}' sets both `token_env:` and `token_file:`; "
                             "keep one")
        return self

    def token(self) -> str | None:
        """The shared token (None when the analyzer has none); ConfigError when unreadable."""
        from lab.errors import ConfigError

        if self.token_env:
            value = os.environ.get(self.token_env, "").strip()
            if not value:
                raise ConfigError(f"Analyzer '{self.name}' takes its token from the environment "
                                  f"variable {self.token_env} (`token_env:`), which is not set; "
                                  f"export {self.token_env}=<the shared token>.")
            return _one_line_token(value, f"${self.token_env}", self.name)
        if self.token_file:
            try:
                value = self.token_file.read_text(errors="replace").strip()
            except OSError as e:
                raise ConfigError(f"Analyzer '{self.name}': cannot read `token_file:` "
                                  f"{self.token_file}: {e.strerror}.") from e
            return _one_line_token(value, str(self.token_file), self.name)
        return None


class DirectorConfig(Strict):
    """The power director: where the power server runs next to the analyzer daemon."""

    host: str
    port: Port = 4950
    ntp_server: str | None = None
    address: str | None = None  # how the power client reaches the server; default: host's
    power_dev: str | None = None  # checkout of mlcommons/power-dev on the director
    ptd: str | None = None  # SPEC PTDaemon binary on the director
    python: str = "python3"  # Python that runs power-dev's server


class Inventory(Strict):
    """The whole of hosts.yaml."""

    hosts: list[HostConfig] = Field(min_length=1)
    analyzers: list[AnalyzerConfig] = Field(default_factory=list)
    director: DirectorConfig | None = None
    system_defaults: dict[str, str | int] = Field(default_factory=dict)

    @field_validator("hosts")
    @classmethod
    def _unique_host_names(cls, hosts: list[HostConfig]) -> list[HostConfig]:
        seen: dict[str, int] = {}
        for i, host in enumerate(hosts):
            if host.name in seen:
                raise ValueError(f"host name '{host.name}' is used by entries {seen[host.name]} "
                                 f"and {i}; every host needs its own name")
            seen[host.name] = i
        return hosts

    @field_validator("analyzers")
    @classmethod
    def _unique_analyzer_names(cls, analyzers: list[AnalyzerConfig]) -> list[AnalyzerConfig]:
        twice = sorted(n for n, k in Counter(a.name for a in analyzers).items() if k > 1)
        if twice:
            raise ValueError(f"analyzer name(s) {', '.join(twice)} used more than once; every "
                             "analyzer needs its own name")
        return analyzers

    @field_validator("system_defaults")
    @classmethod
    def _known_default_fields(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        _check_system_keys(value)
        if "submitter" in value:
            folder_name(str(value["submitter"]))  # the tree's <division>/<submitter> folder
        return value

    @model_validator(mode="after")
    def _references_exist(self) -> Inventory:
        names = [h.name for h in self.hosts]
        for analyzer in self.analyzers:
            if analyzer.host not in names:
                raise ValueError(f"analyzer '{analyzer.name}' runs on host '{analyzer.host}', "
                                 f"which is not in hosts ({_suggest(analyzer.host, names)})")
        analyzers = [a.name for a in self.analyzers]
        for i, host in enumerate(self.hosts):
            if host.power and host.power.analyzer not in analyzers:
                hint = _suggest(host.power.analyzer, analyzers) if analyzers else "there are none"
                raise ValueError(f"hosts[{i}].power.analyzer: host '{host.name}' is measured by "
                                 f"analyzer '{host.power.analyzer}', which is not under "
                                 f"`analyzers:` ({hint}); add it there or name one that is")
        if self.director and self.director.host not in names:
            raise ValueError(f"director host '{self.director.host}' is not in hosts "
                             f"({_suggest(self.director.host, names)})")
        return self

    def host(self, name: str) -> HostConfig:
        """The host called name, or a ConfigError suggesting the closest one."""
        for host in self.hosts:
            if host.name == name:
                return host
        from lab.errors import ConfigError

        raise ConfigError(f"No host named '{name}' in the inventory "
                          f"({_suggest(name, [h.name for h in self.hosts])}).")


    def analyzer_for(self, name: str) -> AnalyzerConfig:
        """The analyzer that measures host name, or a ConfigError naming the key to set."""
        host = self.host(name)
        if host.power is None:
            from lab.errors import ConfigError

            index = self.hosts.index(host)
            known = ", ".join(a.name for a in self.analyzers) or "none yet: add one"
            raise ConfigError(f"Host '{name}' has no power analyzer, and power runs need the one "
                              f"wired to its supply: set `hosts[{index}].power.analyzer` "
                              f"(`power: {{analyzer: NAME}}` on the host) to one of `analyzers:` "
                              f"({known}).")
        return next(a for a in self.analyzers if a.name == host.power.analyzer)


def load_inventory(path: Path | None = None) -> Inventory:
    """Load and validate hosts.yaml (the shipped embedded default when path is None)."""
    return load_model(Path(path) if path else DEFAULT_INVENTORY, Inventory)


def _one_line_token(value: str, where: str, analyzer: str) -> str:
    if not value or len(value) > 4096 or "," in value or "\n" in value:
        from lab.errors import ConfigError

        raise ConfigError(f"Analyzer '{analyzer}': the token in {where} must be one non-empty "
                          "line of at most 4096 characters, without commas.")
    return value


def _check_system_keys(value: dict[str, str | int]) -> None:
    for key in value:
        if key not in system_fields.ALL:
            raise ValueError(f"'{key}' is not a system description field "
                             f"({_suggest(key, list(system_fields.ALL))})")


def _suggest(word: str, choices: list[str]) -> str:
    guess = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean '{guess[0]}'?" if guess else f"known: {', '.join(choices)}"
