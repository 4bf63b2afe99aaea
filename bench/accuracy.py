"""accuracy.txt read the way the checker reads it: each line is `re.match`-ed against the round's
pattern for each target metric, group 1 is the value, and every metric must appear at least once
with every appearance inside its bounds."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from bench.rules import MetricTarget, RoundRules


class MetricResult(BaseModel):
    """One target metric as found in accuracy.txt."""

    model_config = ConfigDict(frozen=True)

    metric: str
    values: tuple[float, ...]  # every matching line, in order; empty when not found
    lower: float | None
    upper: float | None

    @property
    def value(self) -> float | None:
        return self.values[0] if self.values else None

    @property
    def ok(self) -> bool:
        return bool(self.values) and all(self._inside(v) for v in self.values)

    def _inside(self, value: float) -> bool:
        return (self.lower is None or value >= self.lower) and (
            self.upper is None or value <= self.upper)

    def describe(self) -> str:
        """A plain phrase: '<metric> 70.0 (needs >= 75.6954)'."""
        bounds = " and ".join(part for part in (
            f">= {self.lower:g}" if self.lower is not None else "",
            f"<= {self.upper:g}" if self.upper is not None else "") if part)
        if not self.values:
            return f"{self.metric} not found (needs {bounds})"
        shown = ", ".join(f"{v:g}" for v in self.values)
        return f"{self.metric} {shown} (needs {bounds})"


def metric_values(text: str, pattern: str) -> tuple[float, ...]:
    """Values of one metric in accuracy.txt text, one per matching line."""
    compiled = re.compile(pattern)
    found: list[float] = []
    for line in text.splitlines():
        match = compiled.match(line)
        if match:
            try:
                found.append(float(match.group(1)))
            except ValueError:
                continue  # e.g. "." alone; the checker would crash, we just do not count it
    return tuple(found)


def score_accuracy(text: str, targets: tuple[MetricTarget, ...],
                   rules: RoundRules) -> list[MetricResult]:
    """Each target metric of accuracy.txt text, with its bounds."""
    return [MetricResult(metric=t.metric, lower=t.lower, upper=t.upper,
                         values=metric_values(text, rules.accuracy_patterns[t.metric]))
            for t in targets]
