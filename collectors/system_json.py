"""The system JSON of one host: detected values merged with what hosts.yaml and the campaign say.

Precedence, highest first: the campaign (division, submitter), the host's `system:` dict,
`system_defaults:`, the host's `labels` (system_type only), detection, subrun's defaults. Every
field keeps where its value came from, so `subrun describe` can show it and the pre-flight can
name the hosts.yaml key to set. All 35 required keys and the 15 power keys are always written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from collectors.detection import Detected, Value
from lab import system_fields
from lab.config import HostConfig, Inventory

Source = Literal["detected", "configured", "default", "missing"]

# Fields a campaign shares across hosts: a missing one is best set once, in system_defaults.
SHARED = ("division", "submitter", "status")
# Fields the final report converts with int(); the checker also wants them truthy.
NUMERIC = ("number_of_nodes", "accelerators_per_node", "host_processors_per_node")
DEFAULTS: dict[str, Value] = {
    "number_of_nodes": 1,
    "host_networking_topology": "N/A (single node)",
    "hw_notes": "",
    "sw_notes": "",
    "system_type_detail": "",
    "accelerator_on-chip_memories": "",
    "host_processor_interconnect": "",
    **{key: "" for key in system_fields.POWER},
}
SYSTEM_TYPES = ("edge", "datacenter")


class FieldSource(BaseModel):
    """Where one field's value came from: a command, a hosts.yaml key, or subrun's default."""

    model_config = ConfigDict(frozen=True)

    source: Source
    origin: str  # e.g. "lscpu, /proc/cpuinfo", "hosts[1].system.cooling", "campaign.division"
    note: str | None = None  # why a value is missing, or that a configured value overrode one
    detected: Value | None = None  # what detection found, when configuration overrode it


class SystemDescription(BaseModel):
    """The system JSON of one host and the source of each of its fields."""

    model_config = ConfigDict(frozen=True)

    host: str
    host_index: int  # position in hosts.yaml `hosts:`, for the keys the pre-flight names
    system: dict[str, Value]
    sources: dict[str, FieldSource]

    def key_for(self, field: str) -> str:
        """The hosts.yaml (or campaign) key that sets field for this host."""
        source = self.sources.get(field)
        if source and source.source == "configured" and not source.origin.endswith(".labels"):
            return source.origin
        if field in SHARED:
            return f"system_defaults.{field}"
        return f"hosts[{self.host_index}].system.{field}"


def merge(detected: Mapping[str, Detected], inventory: Inventory, host_name: str, *,
          campaign: Mapping[str, Value] | None = None) -> SystemDescription:
    """Combine detected values with hosts.yaml and campaign fields into the full system JSON."""
    config = inventory.host(host_name)
    index = inventory.hosts.index(config)
    layers = _configured_layers(inventory, config, index, campaign or {})
    names = [*system_fields.REQUIRED, *system_fields.POWER]
    names += [k for layer in layers for k in layer[1] if k not in names]
    system: dict[str, Value] = {}
    sources: dict[str, FieldSource] = {}
    for name in names:
        system[name], sources[name] = _resolve(name, layers, detected.get(name))
        system[name] = _normalise(name, system[name])
    return SystemDescription(host=host_name, host_index=index, system=system, sources=sources)


def _configured_layers(inventory: Inventory, config: HostConfig, index: int,
                       campaign: Mapping[str, Value]) -> list[tuple[str, Mapping[str, Value]]]:
    labels = [x for x in SYSTEM_TYPES if x in config.labels]
    from_labels = {"system_type": ",".join(labels)} if labels else {}
    return [("campaign", campaign), (f"hosts[{index}].system", config.system),
            ("system_defaults", inventory.system_defaults),
            (f"hosts[{index}].labels", from_labels)]


def _resolve(name: str, layers: list[tuple[str, Mapping[str, Value]]],
             found: Detected | None) -> tuple[Value, FieldSource]:
    for prefix, values in layers:
        if name in values:
            key = prefix if prefix.endswith(".labels") else f"{prefix}.{name}"
            if found is None or found.value in (None, ""):
                return values[name], FieldSource(source="configured", origin=key)
            return values[name], FieldSource(source="configured", origin=key,
                                             note=f"overrides the detected value ({found.by})",
                                             detected=found.value)
    if found is not None and found.value not in (None, ""):
        return found.value, FieldSource(source="detected", origin=found.by)
    if name in DEFAULTS:
        return DEFAULTS[name], FieldSource(source="default", origin="subrun default",
                                           note=found.note if found else None)
    if found is None:
        return "", FieldSource(source="missing", origin="set it in hosts.yaml")
    return "", FieldSource(source="missing", origin=found.by, note=found.note)


def _normalise(name: str, value: Value) -> Value:
    # 0 is falsy for the checker's emptiness test, "0" is not and still converts with int().
    if name in system_fields.NON_EMPTY and value == 0:
        return "0"
    if name in NUMERIC and isinstance(value, str) and value.strip().isdigit():
        return int(value) if int(value) else "0"
    return value


def write(description: SystemDescription, out_dir: Path,
          system_id: str | None = None) -> tuple[Path, Path]:
    """Write `<id>.json` (the checker's file) and `<id>.sources.json` beside it; return both."""
    out_dir.mkdir(parents=True, exist_ok=True)
    system_id = system_id or description.host
    system_path = out_dir / f"{system_id}.json"
    sources_path = out_dir / f"{system_id}.sources.json"
    system_path.write_text(json.dumps(description.system, indent=2) + "\n")
    sources = {"host": description.host, "host_index": description.host_index,
               "fields": {k: v.model_dump(exclude_none=True)
                          for k, v in description.sources.items()}}
    sources_path.write_text(json.dumps(sources, indent=2) + "\n")
    return system_path, sources_path
