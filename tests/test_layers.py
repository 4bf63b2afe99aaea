"""The architecture as a test: imports point down only, each heavy library lives in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["lab", "bench", "submission", "collectors", "power", "flows"]  # bottom to top
ONLY_IN = {
    "paramiko": {"lab/ssh.py"},
    "docker": {"lab/docker.py"},
    "prefect": {"flows"},
    "pyvisa": {"power/instrument.py"},
    "pyvisa_sim": {"power/instrument.py"},
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    rel = path.relative_to(ROOT)
    own = LAYERS.index(rel.parts[0])
    for name in imports_of(path):
        if name in LAYERS:
            assert LAYERS.index(name) <= own, f"{rel} imports {name}, a layer above it"
        for library, allowed in ONLY_IN.items():
            if name == library:
                assert any(str(rel) == a or rel.parts[0] == a for a in allowed), (
                    f"{rel} imports {library}; only {sorted(allowed)} may"
                )
