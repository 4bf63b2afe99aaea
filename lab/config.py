"""The lab inventory (hosts.yaml) as strict models: hosts, power analyzers, the power director.

Secrets never live here: SSH keys are named by path, passwords come from the environment.
Paths are resolved against the directory of the file that names them.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ByteSize,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lab import system_fields
from lab.yamlfile import load_model

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
Port = Annotated[int, Field(ge=1, le=65535)]
DEFAULT_INVENTORY = Path(__file__).resolve().parent.parent / "hosts.yaml"


class Strict(BaseModel):
    """Base for every model a person writes: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Mount(Strict):
    """A dataset or model directory on the target, mounted read-only into benchmark containers."""

    source: str
    target: str
    read_only: bool = True


class DockerSettings(Strict):
    """How benchmark containers are provisioned and started on one host."""

    engine: bool = True
    docker_host: str | None = None  # DOCKER_HOST on the target, when not the default socket
    provision: Literal["build", "ship"] = "build"  # build on the target, or ship from controller
    base_image: str | None = None  # what benchmark images build FROM here (default: manifest's)
    gpus: Literal["all"] | list[str] | None = None
    shm_size: Annotated[str, StringConstraints(pattern=r"^\d+[bkmgBKMG]?$")] = "1g"
    ulimits: dict[str, int] = Field(default_factory=dict)
    mounts: list[Mount] = Field(default_factory=list)


class NativeSettings(Strict):
    """How benchmarks run on a host without Docker (`docker: {engine: false}`)."""

    python: str = "python3"  # the interpreter the benchmark's venv is made from


class Limits(Strict):
    """What the controller accepts from a target it does not trust: the files one run may
    leave for collection, and the output it keeps of any one command (per stream, its end)."""

    collect_max_files: Annotated[int, Field(ge=1)] = 50_000
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
    ssh_alias: str | None = None
    known_hosts: Path | None = None
    trust_on_first_use: bool = False
    work_dir: str = "/var/tmp/subrun"
    labels: list[str] = Field(default_factory=list)
    # idle seconds before every run: one run's heat and caches stay out of the next
    # (the mobile rules' 5-minute cool-down is settle_s: 300)
    settle_s: float = Field(default=3.0, ge=0, le=3600)
    # how long one outage of an SSH link may last (reconnecting and reattaching the whole
    # time) before the host is given up for the campaign; its other hosts carry on
    outage_budget_s: float = Field(default=180.0, gt=0, le=86400)
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


class AnalyzerConfig(Strict):
    """A power analyzer, behind a PTDaemon-protocol daemon on some host."""

    name: Name
    model: Literal["WT310", "WT310E", "WT333E"] = "WT310E"
    resource: str = "sim"  # "sim" (pyvisa-sim) or a VISA resource string
    host: str = "local"  # the host the daemon runs on
    port: Port = 8888
    # How the controller reaches the daemon (and what it listens on); default: the host's
    # address, or 127.0.0.1 for a local host.
    address: str | None = None
    sim_file: Path | None = None  # a pyvisa-sim YAML of your own instead of the shipped one
    visa_library: str = ""  # pyvisa backend for a real instrument, e.g. "@py"; "" = default
    python: str | None = None  # Python with subrun on the daemon's host; default python3
    # For SPEC PTDaemon behind power-dev (the official path): PTDaemon's own device settings.
    device_type: int | None = None  # default: 49 for WT310/WT310E, 52 for WT333E
    device_port: str | None = None  # e.g. /dev/usbtmc0, or the serial number with -y
    interface_flag: Literal["", "-g", "-n", "-y", "-U"] = ""

    @field_validator("sim_file")
    @classmethod
    def _resolve_sim_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        path = Path(os.path.expanduser(value))
        if not path.is_absolute() and info.context and "base_dir" in info.context:
            path = Path(info.context["base_dir"]) / path
        if not path.is_file():
            raise ValueError(f"no pyvisa-sim file at {path}; fix `sim_file:` or remove it")
        return path


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

    @field_validator("system_defaults")
    @classmethod
    def _known_default_fields(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        _check_system_keys(value)
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


def _check_system_keys(value: dict[str, str | int]) -> None:
    for key in value:
        if key not in system_fields.ALL:
            raise ValueError(f"'{key}' is not a system description field "
                             f"({_suggest(key, list(system_fields.ALL))})")


def _suggest(word: str, choices: list[str]) -> str:
    guess = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean '{guess[0]}'?" if guess else f"known: {', '.join(choices)}"
