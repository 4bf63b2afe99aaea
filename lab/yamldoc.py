"""Read one YAML document a person wrote, within caps, so that no file can hang or exhaust us.

PyYAML on its own reads a device such as /dev/zero until memory runs out, recurses once per
nesting level (a few thousand `[` end in RecursionError), follows an alias to the node that holds
it into an endless structure, and lets aliases repeat aliases: 642 bytes can stand for a billion
values that validation then walks for minutes. Here the file must be a regular file of at most
MAX_BYTES of UTF-8 text, and while the document is composed (before any Python object is built)
its nesting depth and the number of values it expands to, every alias counted in full, are capped.
Anything else PyYAML raises is turned into a ConfigError naming the file, line and column.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from lab.errors import ConfigError

# A hosts.yaml or campaign is a few KiB (200 hosts: about 40 KiB). Parsing and composing run at
# some 300 KiB/s here, so the cap also bounds the time any file takes to be read or refused.
MAX_BYTES = 256 * 1024
MAX_DEPTH = 50  # nesting levels; the deepest real file has under ten
MAX_VALUES = 100_000  # values the document stands for, each alias counted as what it repeats
_BOMS = {b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16", b"\x00\x00\xfe\xff": "UTF-32",
         b"\xff\xfe\x00\x00": "UTF-32"}


def read_document(path: Path) -> tuple[yaml.Node | None, Any]:
    """The composed node tree and the Python data of the YAML file at path, or ConfigError."""
    text = _read_text(path)
    try:
        loader = _CappedLoader(text)  # checks every character is printable
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as e:  # libyaml counts bytes of UTF-8, PyYAML characters
        before = text.encode()[:e.position].decode("utf-8", "replace") if _Events is not \
            _PythonEvents else text[:e.position]
        line, column = _position(before, None)
        raise ConfigError(f"{path}:{line}:{column}: contains the control character "
                          f"U+{e.character:04X}, which YAML does not allow; remove it "
                          "(was the file written by a binary tool?).") from e
    except _TooMuch as e:
        mark = e.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: refused: {e.problem}; no configuration file needs that, "
                          "so check it is the file you meant.") from e
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: this is not valid YAML: {e.problem}. "
                          "Check the indentation and quoting around that line.") from e
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as e:
        raise ConfigError(f"{path}: this is not valid YAML ({type(e).__name__}). "
                          "Check the file is the one you meant.") from e
    return node, data


def _read_text(path: Path) -> str:
    try:  # opened without blocking (a pipe would wait for a writer), then checked as opened
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"{path}: is not a regular file (a folder, device or pipe); "
                                  "name the YAML file itself.")
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: file not found. Create it, or pass the right path.") from e
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror}.") from e
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path}: is larger than {MAX_BYTES // 1024} KiB, far more than a "
                          "configuration file needs; is it the right file?")
    for bom, name in sorted(_BOMS.items(), key=lambda item: -len(item[0])):
        if raw.startswith(bom):
            raise ConfigError(f"{path}: is {name} text; save it as UTF-8.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line, column = _position(raw[:e.start].decode("utf-8", "replace"), None)
        raise ConfigError(f"{path}:{line}:{column}: is not UTF-8 text (a byte there cannot be "
                          "decoded); save the file as UTF-8.") from e


def _position(text: str, offset: int | None) -> tuple[int, int]:
    """1-based line and column of offset in text (its end when offset is None)."""
    before = text if offset is None else text[:offset]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1


class _TooMuch(ComposerError):
    """The document exceeds a cap: valid YAML, perhaps, but no configuration file looks so."""


def _refused(problem: str, event: Any) -> _TooMuch:
    return _TooMuch(None, None, problem, event.start_mark)


class _PythonEvents(Reader, Scanner, Parser):
    """PyYAML's own reader, scanner and parser, for a PyYAML built without libyaml."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)


try:  # libyaml scans and parses about eight times faster than PyYAML's Python
    from yaml._yaml import CParser as _Events
except ImportError:  # pragma: no cover
    _Events = _PythonEvents  # type: ignore[misc, assignment]


class _CappedLoader(Composer, _Events, SafeConstructor, Resolver):
    """A safe loader whose composer (PyYAML's, in Python) counts as it builds the node tree:
    depth, recursive aliases, expanded size. Events come from libyaml when it is there."""

    def __init__(self, text: str) -> None:
        _Events.__init__(self, text)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        Composer.__init__(self)
        self._depth = 0
        self._open_anchors: list[str] = []
        self._values: dict[int, int] = {}  # id(node) -> values it expands to
        self._total = 0  # values so far, each alias counted as what it repeats
        self._aliased = False

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: Any = self.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self._open_anchors:
                raise _refused(f"the alias *{event.anchor} refers to a node that contains "
                               "it, which never ends", event)
            node = super().compose_node(parent, index)
            self._aliased = True
            self._add(self._values.get(id(node), 1), event)
            return node
        anchor = event.anchor if isinstance(event, ScalarEvent | CollectionStartEvent) else None
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _refused(f"nested deeper than {MAX_DEPTH} levels", event)
        self._add(1, event)
        if anchor:
            self._open_anchors.append(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor:
                self._open_anchors.pop()
        # only an anchored node can be repeated: remember what it expands to
        if anchor and node is not None:
            self._values[id(node)] = self._expanded(node)
        return node

    def _add(self, values: int, event: Any) -> None:
        self._total += values
        if self._total > MAX_VALUES:
            why = (" once its aliases are expanded (aliases repeating aliases)" if self._aliased
                   else "")
            raise _refused(f"the document stands for more than {MAX_VALUES} values{why}", event)

    def _expanded(self, node: yaml.Node) -> int:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            return 1
        return 1 + sum(self._values.get(id(c)) or self._expanded(c) for c in children)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as e:  # int('1' * 5000), a 2001-13-45 timestamp
            reason = str(e).split(";")[0]  # not Python's advice on raising its limits
            raise ConstructorError(None, None, f"a value cannot be read ({reason})",
                                   node.start_mark) from None
