"""`subrun hosts check` against the real lab: every host reachable, each engine answering."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from lab.config import Inventory
from lab.probe import probe

pytestmark = pytest.mark.lab


def test_every_lab_host_is_reachable_with_its_own_engine(lab_inventory: Inventory) -> None:
    reports = {h.name: probe(h) for h in lab_inventory.hosts}
    assert all(r.reachable for r in reports.values()), reports
    assert all(r.docker[0].isdigit() for r in reports.values()), reports
    assert all(abs(r.clock_offset_s or 9) < 0.5 for r in reports.values())
    assert all((r.free_gb or 0) > 0 for r in reports.values())


def test_cli_table(lab_inventory: Inventory, lab_dir) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["hosts", "check", str(lab_dir / "hosts.yaml")])
    assert result.exit_code == 0, result.output
    for name in ("local", "h2", "h3"):
        assert name in result.output
    assert "3 host(s) reachable" in result.output


def test_unreachable_host_exits_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: gone, address: 127.0.0.9, port: 2299}\n")
    result = CliRunner().invoke(app, ["hosts", "check", str(path)])
    assert result.exit_code == 3
    assert "Cannot reach host 'gone'" in result.output


def test_a_reachable_host_with_problems_prints_a_line_for_each(tmp_path: Path) -> None:
    """The controller itself, reached and measured for real, with its Docker engine pointed at a
    socket nothing listens on: reachable, with one problem line naming the host and the fix."""
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: here, transport: local, work_dir: " + str(tmp_path / "w")
                    + ", docker: {docker_host: 'unix://" + str(tmp_path / "none.sock") + "'}}\n")
    result = CliRunner().invoke(app, ["hosts", "check", str(path)])
    assert result.exit_code == 0, result.output
    problems = [line for line in result.output.splitlines() if line.startswith("problem:")]
    assert problems == ["problem: host 'here': Docker engine not usable (engine not answering); "
                        "start dockerd or set `docker: {engine: false}` for native runs"], problems
    assert "1 host(s) reachable, 1 problem(s) to look at." in result.output
