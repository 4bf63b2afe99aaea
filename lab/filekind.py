"""What to say about a file that is not a settings file at all, without quoting it.

A path in a campaign (`inventory:`) or on the command line may name the wrong file, and that
file may be a `.env`, a private key or a password list: its content must never reach the
terminal, a CI log or a Prefect run log. Only its kind and its path are named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

KINDS = {str: "text", list: "a list", int: "a number", float: "a number", bool: "true/false"}


def not_settings(path: Path, data: Any, model: type) -> str:
    """One paragraph saying path is not a file of model, naming what its top level is."""
    kind = KINDS.get(type(data), type(data).__name__)
    return (f"{path}: this file cannot be read as {model.__name__} settings: its top level is "
            f"{kind}, not a mapping of `key: value` settings (its content is not shown, in case "
            "it holds secrets). Check that the path points at the right YAML file.")
