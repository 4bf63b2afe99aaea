"""Load a YAML file a person wrote into a strict pydantic model, with errors people can act on.

Every problem is reported at once, each with file, line, field path and, for a misspelt key,
the closest valid name. Syntax errors name the line and column.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from lab.errors import ConfigError
from lab.filekind import not_settings
from lab.yamldoc import read_document

M = TypeVar("M", bound=BaseModel)
Loc = tuple[str | int, ...]


def load_model(path: Path, model: type[M], *, context: dict[str, Any] | None = None) -> M:
    """Parse path as YAML and validate it into model, or raise ConfigError listing every problem."""
    path = Path(path)
    node, data = read_document(path)  # capped: size, encoding, depth, aliases
    lines = _line_index(node)
    duplicate = _first_duplicate_key(node)
    if duplicate:
        key, line = duplicate
        raise ConfigError(f"{path}:{line}: the key '{key}' appears twice in the same mapping; "
                          "YAML would silently keep only the last one. Remove one of them.")
    if data is None:
        data = {}
    if not isinstance(data, dict):  # not a settings file at all: never echo what it holds
        raise ConfigError(not_settings(path, data, model))
    try:
        return model.model_validate(data, context={"base_dir": path.parent, **(context or {})})
    except ValidationError as e:
        problems = [_describe(path, lines, err, model) for err in e.errors()]
        head = f"{path}: {len(problems)} problem(s) found:" if len(problems) > 1 else ""
        raise ConfigError("\n".join([head, *problems]).strip()) from None


def _describe(path: Path, lines: dict[Loc, int], err: Any, model: type[BaseModel]) -> str:
    loc: Loc = tuple(err["loc"])
    line = _nearest_line(lines, loc)
    field = _dotted(loc) or "(top level)"
    message = err["msg"]
    if err["type"] == "extra_forbidden":
        valid = _valid_keys(model, loc[:-1])
        guess = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = (f"; did you mean '{guess[0]}'?" if guess
                else f"; valid keys here: {', '.join(valid)}")
        message = f"unknown key{hint}"
    elif "input" in err and err["type"] not in ("missing",) and not isinstance(
        err["input"], dict | list
    ):
        message = f"{message} (got {err['input']!r})"
    return f"{path}:{line}: {field}: {message}" if line else f"{path}: {field}: {message}"


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before", "function-wrap"):
            continue
        else:
            shown = str(part) if str(part).isprintable() else repr(part)  # "min_duration\n"
            out += ("." if out else "") + shown
    return out


def _valid_keys(model: type[BaseModel], loc: Loc) -> list[str]:
    """The field names of the model found at loc (list indexes and dict keys are stepped over)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current,
                                                                                  BaseModel)):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            continue  # a key of a dict of models (e.g. models.resnet): step over it
        current = _inner_model(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or name for name, f in current.model_fields.items())
    return []


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _line_index(node: yaml.Node | None, loc: Loc = ()) -> dict[Loc, int]:
    """Map each key path in the document to its 1-based line."""
    index: dict[Loc, int] = {}
    if node is None:
        return index
    index[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*loc, key_node.value)
            index.update(_line_index(value_node, key))
            index[key] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*loc, i)))
    return index


def _nearest_line(lines: dict[Loc, int], loc: Loc) -> int | None:
    clean = tuple(p for p in loc if p not in ("function-after", "function-before"))
    for end in range(len(clean), -1, -1):
        if clean[:end] in lines:
            return lines[clean[:end]]
    return None


def _first_duplicate_key(node: yaml.Node | None) -> tuple[str, int] | None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.value in seen:
                return key_node.value, key_node.start_mark.line + 1
            seen.add(key_node.value)
            if found := _first_duplicate_key(value_node):
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if found := _first_duplicate_key(item):
                return found
    return None
