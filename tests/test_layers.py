"""The architecture as a test: each package imports only the floors below it that the design names
(siblings on a floor never import each other), and each heavy library lives in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Which project packages each package may import (DESIGN.md "Layers"). power, collectors and
# submission share a floor over bench and lab and never import one another; only flows sees all.
ALLOWED: dict[str, set[str]] = {
    "lab": set(),
    "bench": {"lab"},
    "submission": {"bench", "lab"},
    "collectors": {"bench", "lab"},
    "power": {"bench", "lab"},
    "flows": {"power", "collectors", "submission", "bench", "lab"},
    # helpers for tests and benchmark scripts: over every package, imported by none of them
    "testkit": {"flows", "power", "collectors", "submission", "bench", "lab"},
    # benchmark scripts and lab scripts use the packages and the testkit, never the tests
    "benchmarks": {"testkit", "flows", "power", "collectors", "submission", "bench", "lab"},
    "scripts": {"testkit", "flows", "power", "collectors", "submission", "bench", "lab"},
    # the harnesses run inside the benchmark containers, where no orchestrator code exists
    "images": set(),
}
PROJECT = set(ALLOWED) | {"tests"}
ONLY_IN = {
    "paramiko": {"lab/ssh.py"},
    "docker": set(),  # the docker SDK: engines are driven by the CLI over the Host (lab/docker.py)
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
    return sorted(p for package in ALLOWED for p in (ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    rel = path.relative_to(ROOT)
    own = rel.parts[0]
    for name in imports_of(path):
        if name in PROJECT and name != own:
            assert name in ALLOWED[own], (
                f"{rel} imports {name}; {own} may import only {sorted(ALLOWED[own]) or 'nothing'}"
                " of the project (DESIGN.md, Layers)")
        for library, allowed in ONLY_IN.items():
            if name == library:
                assert any(str(rel) == a or rel.parts[0] == a for a in allowed), (
                    f"{rel} imports {library}; only {sorted(allowed)} may"
                )


def test_the_rule_refuses_a_sibling_and_an_upward_import(tmp_path: Path) -> None:
    """The check itself: power -> submission (siblings) and bench -> power (upward) are refused."""
    for own, imported in (("power", "submission"), ("bench", "power"), ("benchmarks", "tests")):
        source = tmp_path / f"{own}.py"
        source.write_text(f"from {imported}.x import y\n")
        assert imported in imports_of(source)
        assert imported not in ALLOWED[own]
