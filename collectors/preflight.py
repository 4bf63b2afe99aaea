"""The pre-flight of system descriptions: every field missing, empty, a placeholder or invalid.

It runs before any benchmark run. In submission mode a single problem blocks the campaign
(ConfigError listing all of them, each with the hosts.yaml key to set); in short mode the
problems are returned for the caller to show as warnings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bench.run import Mode
from collectors.system_json import NUMERIC, SystemDescription
from lab import system_fields
from lab.errors import ConfigError

DIVISIONS = ("closed", "open", "network")
STATUSES = ("available", "preview", "rdi")
SYSTEM_TYPES = ("datacenter", "edge", "datacenter,edge", "edge,datacenter")
PLACEHOLDER = re.compile(
    r"^\s*(tbd|tba|todo|fixme|changeme|change me|fill me|fill in|placeholder|xxx+|\?+|-+|\.\.\.|"
    r"<[^>]*>|\{\{.*\}\}|unknown)\s*$", re.I)


class Problem(BaseModel):
    """One field of one host's system description that a person must fix."""

    model_config = ConfigDict(frozen=True)

    host: str
    field: str
    issue: str  # e.g. "is empty", "is a placeholder ('TBD')"
    key: str  # the hosts.yaml key to set, e.g. "hosts[1].system.cooling"

    def __str__(self) -> str:
        return f"host '{self.host}': {self.field} {self.issue}; set `{self.key}`"


def check(description: SystemDescription) -> list[Problem]:
    """Every problem in one host's system description, in field order."""
    problems = []
    system = description.system
    for field in (*system_fields.REQUIRED, *system_fields.POWER, *system_fields.NETWORK):
        if field not in system:
            if field in system_fields.REQUIRED:
                problems.append(_problem(description, field, "is missing"))
            continue
        issue = _issue(field, system[field])
        if issue:
            note = description.sources[field].note if field in description.sources else None
            problems.append(_problem(description, field, issue + (f" ({note})" if note and
                                                                  "empty" in issue else "")))
    problems += _network_problems(description)
    return problems


def preflight(descriptions: Sequence[SystemDescription], mode: Mode,
              inventory_path: Path | None = None) -> list[Problem]:
    """Check every description; raise ConfigError in submission mode, else return the problems."""
    problems = [p for d in descriptions for p in check(d)]
    if problems and mode is Mode.SUBMISSION:
        where = f" in {inventory_path}" if inventory_path else " in hosts.yaml"
        listing = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(
            f"The system description is not ready for a submission: {len(problems)} field(s) "
            f"to set{where}:\n{listing}\nSet each key (run `subrun describe HOST` to see every "
            "field and where its value comes from), then start the campaign again.")
    return problems


def _issue(field: str, value: object) -> str | None:
    text = str(value).strip() if value is not None else ""
    if field in system_fields.NON_EMPTY and not value:
        return "is empty"
    if text and PLACEHOLDER.match(text):
        return f"is a placeholder ({text!r})"
    if field in NUMERIC and not _is_int(value):
        return f"must be a whole number (the final report calls int() on it), not {value!r}"
    if field == "division" and text.lower() not in DIVISIONS:
        return f"is {text!r}, not one of {', '.join(DIVISIONS)}"
    if field == "status" and text.lower() not in STATUSES:
        return f"is {text!r}, not one of {', '.join(STATUSES)}"
    if field == "system_type" and text not in SYSTEM_TYPES:
        return f"is {text!r}, not one of {', '.join(SYSTEM_TYPES)} (no spaces)"
    return None


def _network_problems(description: SystemDescription) -> list[Problem]:
    system = description.system
    is_network = str(system.get("is_network", "")).lower() == "true"
    if str(system.get("division", "")).lower() == "network":
        if not is_network:
            return [_problem(description, "is_network", "must be \"true\" in the network "
                             "division")]
        return [_problem(description, f, "is empty (required in the network division)")
                for f in system_fields.NETWORK if not system.get(f)]
    if is_network:
        return [_problem(description, "is_network", "is \"true\" outside the network division")]
    return []


def _problem(description: SystemDescription, field: str, issue: str) -> Problem:
    return Problem(host=description.host, field=field, issue=issue,
                   key=description.key_for(field))


def _is_int(value: object) -> bool:
    try:
        int(str(value))
    except ValueError:
        return False
    return True
