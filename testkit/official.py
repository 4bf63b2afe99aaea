"""Where the tests find the official judges: mlcommons/inference and mlcommons/power-dev.

SUBRUN_INFERENCE_REPO / SUBRUN_POWER_DEV name a checkout; without them the pinned, unmodified
snapshots next to the project (`../shared/official/`) are used, so `make test` runs the
official checker, compliance scripts and power-dev by default.
"""

from __future__ import annotations

import os
from pathlib import Path

PINNED = Path(__file__).resolve().parents[1].parent / "shared" / "official"


def _checkout(variable: str, pinned: Path) -> Path | None:
    value = os.environ.get(variable, "").strip()
    if value:
        return Path(value)
    return pinned if pinned.is_dir() else None


INFERENCE = _checkout("SUBRUN_INFERENCE_REPO", PINNED / "inference")
POWER_DEV = _checkout("SUBRUN_POWER_DEV", PINNED / "power-dev")


def missing(tool: str) -> str | None:
    """Why an official tool ("inference" or "power-dev") cannot be used, or None when it can."""
    variable, found = {"inference": ("SUBRUN_INFERENCE_REPO", INFERENCE),
                       "power-dev": ("SUBRUN_POWER_DEV", POWER_DEV)}[tool]
    if found is not None and found.is_dir():
        return None
    where = found or PINNED / tool
    return (f"The official {tool} checkout is missing ({where}): the tests that compare with "
            f"the official judges cannot run. Put the pinned snapshot at {PINNED / tool}, or "
            f"set {variable} to a checkout of mlcommons/{tool}.")
