"""Shared fixtures. Tests marked `lab` use the real test lab (`python3 scripts/testlab.py up`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab.config import HostConfig, Inventory, load_inventory
from lab.host import Host
from lab.transport import open_host

ROOT = Path(__file__).resolve().parent.parent
LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))


@pytest.fixture(scope="session")
def lab_dir() -> Path:
    return LAB


@pytest.fixture(scope="session")
def lab_inventory() -> Inventory:
    """The test lab's inventory; a missing lab is an error, never a silent skip."""
    path = LAB / "hosts.yaml"
    if not path.exists():
        pytest.fail(f"The test lab is not up ({path} missing): run "
                    "`python3 scripts/testlab.py up` or `make test`.")
    return load_inventory(path)


@pytest.fixture(scope="session")
def ssh_config(lab_inventory: Inventory) -> HostConfig:
    return lab_inventory.host("h2")


@pytest.fixture(params=["local", "h2"])
def any_host(request: pytest.FixtureRequest, lab_inventory: Inventory, tmp_path: Path) -> Host:
    """The same contract, once over the local transport and once over real SSH."""
    config = lab_inventory.host(request.param)
    config = config.model_copy(update={"work_dir": str(tmp_path / "work")})
    host = open_host(config)
    yield host
    host.close()


def lab_pid(name: str) -> int:
    """The pid the test lab recorded for one of its processes (e.g. 'h2-sshd')."""
    return int((LAB / "pids" / f"{name}.pid").read_text())
