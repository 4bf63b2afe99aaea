"""Prechecks at submitter, system and model level (reference/checker.md §1.3, §2, §3.2, §8.5)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.rules import RoundRules, SystemType
from lab import system_fields
from lab.errors import ConfigError
from submission.layout import Layout

if TYPE_CHECKING:
    from submission.precheck import Findings, Severity

SYSTEM_TYPES: dict[str, SystemType] = {"datacenter": "datacenter", "edge": "edge",
                                       "datacenter,edge": "datacenter,edge",
                                       "edge,datacenter": "datacenter,edge"}
STATUSES = ("available", "preview", "rdi")
INT_FIELDS = ("number_of_nodes", "accelerators_per_node", "host_processors_per_node")


def submitter(found: Findings, layout: Layout) -> None:
    """src/ (code/) present, calibration for closed, every system JSON used by a result."""
    if not layout.src_dir.is_dir():
        found.add("no-src", "error", layout.src_dir, f"{layout.src_dir.name}/ is missing; the "
                  "checker fails every result of this submitter without it")
    if layout.division == "closed" and not layout.calibration_md.is_file():
        found.add("no-calibration", "warning", layout.calibration_md, "closed division asks for "
                  "documentation/calibration.md (the old checker requires it)")
    with_results = {p.name for p in layout.results_dir.iterdir()} if layout.results_dir.is_dir() \
        else set()
    if layout.systems_dir.is_dir():
        for path in sorted(layout.systems_dir.glob("*.json")):
            if path.stem not in with_results:
                found.add("system-without-results", "warning", path, "a system description "
                          "with no results/<system> folder (the old checker refuses this)")


def model_mapping(found: Findings, layout: Layout) -> dict[str, str]:
    """open/<submitter>/model_mapping.json, or {} (only the open division reads it)."""
    path = layout.model_mapping_json
    if layout.division != "open" or not path.is_file():
        return {}
    data = _json(found, path, "model_mapping.json")
    if not isinstance(data, dict):
        found.add("bad-model-mapping", "error", path, 'must be a JSON object {"my-model": '
                  '"official-model"}')
        return {}
    return {str(k): str(v) for k, v in data.items()}


def system(found: Findings, layout: Layout, name: str) -> SystemType | None:
    """Check systems/<name>.json; its system_type, or None when the checker would crash."""
    path = layout.system_json(name)
    if not path.is_file():
        found.add("missing-system-json", "crash", path, f"results/{name} has no systems/"
                  f"{name}.json: the checker crashes (AttributeError). Describe the host "
                  "(`subrun describe`) and re-assemble.")
        return None
    data = _json(found, path, "the system description")
    if not isinstance(data, dict):
        return None
    system_type = SYSTEM_TYPES.get(str(data.get("system_type")))
    if system_type is None:
        found.add("invalid-system-type", "crash", path, f"system_type "
                  f"{data.get('system_type')!r} is not one "
                  f"of {', '.join(SYSTEM_TYPES)}: the checker crashes (ValueError). Set "
                  "`system_type` in hosts.yaml.")
        return None
    _fields(found, layout, path, data)
    return system_type


def _fields(found: Findings, layout: Layout, path: Any, data: dict[str, Any]) -> None:
    missing = [k for k in system_fields.REQUIRED if k not in data]
    empty = [k for k in system_fields.NON_EMPTY if k in data and not data[k]]
    if missing or empty:
        found.add("system-fields", "error", path, "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else [])
            + ([f"empty {', '.join(empty)}"] if empty else []))
            + ". Set them under `system:` in hosts.yaml or fix the collector output.")
    for key in INT_FIELDS:
        if key in data and data[key] and not _is_int(data[key]):
            found.add("system-int-field", "crash", path, f"{key} = {data[key]!r} does not "
                      "convert with int(): the checker's CSV export (or the final report) "
                      "crashes after every check passed")
    if str(data.get("status", "")).lower() not in STATUSES:
        found.add("system-status", "error", path, f"status {data.get('status')!r} is not one of "
                  f"{', '.join(STATUSES)}")
    for key, want in (("division", layout.division), ("submitter", layout.submitter)):
        if str(data.get(key, "")).lower() != want.lower():
            found.add("system-mismatch", "error", path, f"{key} is {data.get(key)!r} but the "
                      f"folder says {want!r}")


def model(found: Findings, layout: Layout, rules: RoundRules, system_name: str, model_dir: str,
          system_type: SystemType, mapping: dict[str, str],
          scenarios: Sequence[str]) -> str | None:
    """The official model of a results/<system>/<model> folder, checked against the round."""
    path = layout.system_results_dir(system_name) / model_dir
    try:
        official = rules.resolve(mapping.get(model_dir, model_dir))
    except ConfigError:
        severity: Severity = "error" if layout.division == "open" else "crash"
        hint = " Add it to model_mapping.json." if layout.division == "open" else ""
        found.add("unknown-model", severity, path, f"'{model_dir}' is not a model of "
                  f"{rules.round}; the checker {'crashes' if severity == 'crash' else 'fails it'}."
                  + hint)
        return None
    if layout.division == "open":
        return official
    table = rules.model(official).scenarios
    if table is not None and system_type not in table:
        found.add("model-not-for-system-type", "crash", path,
                  f"{official} is not in {rules.round}'s table for system_type {system_type} "
                  f"(allowed: {', '.join(table) or 'none'}): the checker crashes "
                  "(TypeError). Move it to the open division or drop it.")
        return None
    wanted = table.get(system_type) if table is not None else None
    if wanted is not None:  # None: the round file does not know this model's table
        _scenario_set(found, path, wanted.required, wanted.one_of, scenarios)
    return official


def _scenario_set(found: Findings, path: Any, required: Sequence[str], one_of: Sequence[str],
                  present: Sequence[str]) -> None:
    have = {s.lower() for s in present}
    missing = [s for s in required if s.lower() not in have]
    allowed = {s.lower() for s in (*required, *one_of)}
    unknown = sorted(s for s in present if s.lower() not in allowed)
    if one_of and not have & {s.lower() for s in one_of}:
        missing.append("one of " + "/".join(one_of))
    if missing:
        found.add("missing-scenarios", "error", path, f"missing required scenario(s) "
                  f"{', '.join(missing)}; the checker fails every scenario of this model")
    if unknown:
        found.add("unknown-scenarios", "error", path, f"scenario(s) {', '.join(unknown)} are not "
                  "allowed for this model and system type")


def _json(found: Findings, path: Any, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        found.add("bad-json", "crash", path, f"{what} is not readable JSON ({e})")
        return None


def _is_int(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True
