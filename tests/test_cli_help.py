"""The help texts speak to the user: what the tool and each command do, not how they work."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app


def test_top_level_help_says_what_subrun_does() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Run MLPerf Inference submission campaigns on your lab machines" in text
    assert "SubrunError" not in text and "Errors from below" not in text
    for command in ("plan", "run", "status", "alert", "serve"):
        assert f" {command} " in text
