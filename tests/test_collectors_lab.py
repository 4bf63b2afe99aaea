"""Collectors over real SSH to the lab hosts: a complete system JSON for each, the pre-flight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bench.run import Mode
from collectors import memory, software
from collectors.describe import describe
from collectors.preflight import preflight
from flows.cli import app
from lab import system_fields
from lab.config import DockerSettings, Inventory, load_inventory
from lab.errors import ConfigError
from lab.transport import open_host

pytestmark = pytest.mark.lab

IMAGE = "subrun/debian:bookworm"
HUMAN_DEFAULTS = {"division": "closed", "submitter": "Lab", "status": "available"}


def filled(lab_inventory: Inventory, **extra: str) -> Inventory:
    """The lab inventory with what a person writes by hand: the fields no probe can know."""
    hosts = [h.model_copy(update={"system": {
        "system_name": f"Lab host {h.name}", "cooling": "air",
        # The lab has no dmidecode: a person states the DIMMs.
        "host_memory_configuration": "1x 24 GB (virtual machine)", **extra}})
        for h in lab_inventory.hosts]
    return lab_inventory.model_copy(update={"hosts": hosts, "system_defaults": HUMAN_DEFAULTS})


@pytest.mark.parametrize("name", ["h2", "h3"])
def test_complete_system_json_over_ssh(lab_inventory: Inventory, name: str) -> None:
    description = describe(filled(lab_inventory), name, images=[IMAGE])
    system, sources = description.system, description.sources
    assert set(system_fields.REQUIRED) <= set(system) and set(system_fields.POWER) <= set(system)
    assert all(system[k] for k in system_fields.NON_EMPTY), {
        k: sources[k] for k in system_fields.NON_EMPTY if not system[k]}
    for key in ("number_of_nodes", "accelerators_per_node", "host_processors_per_node"):
        int(system[key])
    assert system["accelerators_per_node"] == "0"  # the lab has no accelerator
    assert system["framework"] == "Python 3.11.2 (no ML framework)"
    assert sources["framework"].origin == f"probe in {IMAGE}"
    assert str(system["other_software_stack"]).startswith("Python 3.11.2")
    assert "Docker " in str(system["other_software_stack"])
    assert sources["host_processor_model_name"].source == "detected"
    assert system["system_type"] == "edge"  # from the host's labels in the lab inventory
    assert preflight([description], Mode.SUBMISSION) == []


def without_human_fields(inventory: Inventory) -> Inventory:
    """The lab inventory with nothing a person writes: every such field is a gap."""
    hosts = [h.model_copy(update={"system": {}}) for h in inventory.hosts]
    return inventory.model_copy(update={"system_defaults": {}, "hosts": hosts})


def test_lab_gaps_are_explained_and_block_a_submission(lab_inventory: Inventory) -> None:
    description = describe(without_human_fields(lab_inventory), "h2", images=[IMAGE])
    problems = {p.field: p for p in preflight([description], Mode.SHORT)}
    assert set(problems) == {"division", "submitter", "status", "system_name",
                             "host_memory_configuration", "cooling"}
    assert problems["host_memory_configuration"].issue == (
        "is empty (`dmidecode` is not installed on host 'h2')")
    assert problems["cooling"].key == "hosts[1].system.cooling"
    assert problems["submitter"].key == "system_defaults.submitter"
    with pytest.raises(ConfigError, match=r"6 field\(s\) to set"):
        preflight([description], Mode.SUBMISSION)


def test_preflight_catches_an_empty_required_field(lab_inventory: Inventory) -> None:
    inventory = filled(lab_inventory, cooling="")
    description = describe(inventory, "h3", images=[IMAGE])
    with pytest.raises(ConfigError) as raised:
        preflight([description], Mode.SUBMISSION)
    assert "host 'h3': cooling is empty; set `hosts[2].system.cooling`" in str(raised.value)
    assert str(raised.value).count("\n  - ") == 1


def test_missing_image_is_a_gap_not_a_crash(lab_inventory: Inventory) -> None:
    description = describe(filled(lab_inventory), "h2", images=["subrun/absent:none"])
    assert description.system["framework"] == ""
    assert "subrun/absent:none" in str(description.sources["framework"].note)


def test_native_host_probes_its_own_python(lab_inventory: Inventory) -> None:
    with open_host(lab_inventory.host("h2")) as host:
        stack = software.collect(host, DockerSettings(engine=False), None)
        assert stack.gap is None and stack.source == "host"
        assert stack.python and stack.python.startswith("3.11")
        gap = memory.collect(host).dimm_gap
        assert gap == "`dmidecode` is not installed on host 'h2'"


def test_cli_describe(lab_dir: Path, tmp_path: Path) -> None:
    data = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    data["system_defaults"] = HUMAN_DEFAULTS
    data["hosts"][1]["system"] = {"system_name": "Lab h2", "cooling": "air"}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["describe", "h2", "--inventory", str(path),
                                      "--out", str(tmp_path / "out"), "--image", IMAGE],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "host_processor_model_name" in result.output and "detected" in result.output
    assert "configured (hosts[1].system.cooling)" in result.output
    assert "set `hosts[1].system.host_memory_configuration`" in result.output
    assert "1 field(s) to fix before a submission campaign." in result.output
    system = json.loads((tmp_path / "out" / "h2.json").read_text())
    assert system["system_name"] == "Lab h2" and system["accelerators_per_node"] == "0"
    sources = json.loads((tmp_path / "out" / "h2.sources.json").read_text())
    assert sources["fields"]["framework"]["origin"] == f"probe in {IMAGE}"
    assert load_inventory(path).host("h2").system["cooling"] == "air"


def test_cli_describe_unknown_host(lab_dir: Path) -> None:
    result = CliRunner().invoke(app, ["describe", "h9", "--inventory",
                                      str(lab_dir / "hosts.yaml")])
    assert result.exit_code == 2
    assert "No host named 'h9'" in result.output
