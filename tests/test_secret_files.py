"""A file that is not a settings file (a .env, a private key) is refused without quoting it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app

ROOT = Path(__file__).resolve().parent.parent
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"


def _private_key(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.mark.parametrize("kind", [".env", "private key", "list", "yaml secrets"])
def test_a_secrets_file_as_inventory_is_refused_without_its_values(tmp_path: Path,
                                                                   kind: str) -> None:
    if kind == "private key":
        secrets = _private_key(tmp_path)
        values = secrets.read_text().splitlines()[1:-1]
    else:
        secrets = tmp_path / "secrets"
        secrets.write_text({".env": f"AWS_SECRET_ACCESS_KEY={SECRET}\nDB_PASSWORD=hunter2\n",
                            "list": f"- {SECRET}\n- hunter2\n",
                            "yaml secrets": f"api_token: {SECRET}\npassword: hunter2\n"}[kind])
        values = [SECRET, "hunter2"]
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(f"inventory: {secrets}\n"
                        "hosts: [{host: local, benchmarks: [{benchmark: digits}]}]\n")
    result = CliRunner().invoke(app, ["plan", str(campaign)])
    assert result.exit_code == 2, result.output
    assert str(secrets) in " ".join(result.output.split())
    for value in values:
        assert value[:12] not in result.output
    if kind == "yaml secrets":  # a mapping: its keys are named, never their values
        assert "api_token" in result.output and "unknown key" in result.output
    else:
        assert "its content is not shown" in result.output
