"""The few facts of a `mlperf_log_detail.txt` the prechecks need, read fast.

Prechecks read four detail logs per result and must finish a 100-result tree in under a second,
so this does not decode every `:::MLLOG` line: it decodes only the lines that carry one of the
keys below or an error (`"is_error": true`), and keeps the first value of each key, which is
what the official checker's parser does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

KEYS = ("result_validity", "effective_scenario", "effective_qsl_rng_seed",
        "effective_sample_index_rng_seed", "effective_schedule_rng_seed", "loadgen_version",
        "effective_min_duration_ms", "effective_accuracy_sample_count",
        "qsl_reported_total_count", "power_begin", "power_end")
_NEEDLES = {key: f'"key": "{key}"' for key in KEYS}
_ERROR = '"is_error": true'
MARKER = ":::MLLOG"


@dataclass
class DetailFacts:
    """Values of the keys above (first occurrence) and every LoadGen error entry."""

    path: Path
    values: dict[str, object] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    marker_ok: bool = True  # the first line starts with :::MLLOG, as the checker requires

    def get(self, key: str) -> object:
        """The first value logged for key, or None."""
        return self.values.get(key)

    @property
    def seeds(self) -> tuple[object, object, object]:
        """(qsl, sample index, schedule) seeds as logged."""
        return (self.get("effective_qsl_rng_seed"), self.get("effective_sample_index_rng_seed"),
                self.get("effective_schedule_rng_seed"))


def read_detail(path: Path) -> DetailFacts:
    """The facts of one detail log; an unreadable file gives facts with marker_ok False."""
    facts = DetailFacts(path)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        facts.marker_ok = False
        return facts
    facts.marker_ok = text.startswith(MARKER)
    for line in text.splitlines():
        if not line.startswith(MARKER):
            continue
        is_error = _ERROR in line
        wanted = [k for k, needle in _NEEDLES.items() if needle in line and k not in facts.values]
        if not wanted and not is_error:
            continue
        try:
            entry = json.loads(line[len(MARKER):])
        except ValueError:
            continue
        if is_error:
            facts.errors.append(f"{entry.get('key')}: {entry.get('value')}")
        for key in wanted:
            if entry.get("key") == key:
                facts.values[key] = entry.get("value")
    return facts
