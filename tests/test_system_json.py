"""Detected facts -> system JSON fields, the merge with hosts.yaml, and the pre-flight (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.run import Mode
from collectors import (
    accelerators,
    cpu,
    docker_engine,
    machine,
    memory,
    network,
    osinfo,
    software,
    storage,
)
from collectors.detection import HostFacts, detected_fields
from collectors.preflight import check, preflight
from collectors.system_json import merge, write
from lab import system_fields
from lab.config import Inventory
from lab.errors import ConfigError

SAMPLES = Path(__file__).parent / "samples" / "collectors"
HUMAN = {"division": "closed", "submitter": "Acme", "status": "available",
         "system_name": "Acme box", "system_type": "datacenter", "cooling": "air"}


def read(name: str, file: str) -> str:
    path = SAMPLES / name / file
    return path.read_text() if path.exists() else ""


def facts(name: str) -> HostFacts:
    """HostFacts parsed from one sample folder, as `detect` would build them on that machine."""
    query = read(name, "nvidia-smi-query.txt")
    if query and "(nvgpu)" not in query:
        gpus = accelerators.parse_nvidia(query, read(name, "nvidia-smi-topo.txt"))
    else:
        gpus = accelerators.parse_jetson(read(name, "device-tree-model.txt"),
                                         read(name, "nv_tegra_release.txt"), query)
    probe = read(name, "software-probe.txt")
    return HostFacts(
        cpu=cpu.parse(read(name, "lscpu-J.txt"), read(name, "proc-cpuinfo.txt")),
        memory=memory.parse(read(name, "proc-meminfo.txt"), read(name, "dmidecode-t-memory.txt")),
        storage=storage.parse(read(name, "lsblk.txt")),
        accelerators=gpus,
        network=network.parse_sysfs(read(name, "net-sysfs.txt")),
        os=osinfo.parse(read(name, "os-release.txt"), read(name, "uname.txt")),
        docker=docker_engine.parse(read(name, "docker-version.txt"), read(name, "docker-info.txt")),
        machine=machine.parse(read(name, "machine.txt")),
        software=(software.parse(probe, "bench-image"),) if probe else (),
    )


def inventory(host_system: dict[str, str | int] | None = None,
              defaults: dict[str, str | int] | None = None,
              labels: tuple[str, ...] = ()) -> Inventory:
    return Inventory.model_validate({
        "hosts": [{"name": "ctl", "transport": "local"},
                  {"name": "box", "address": "10.0.0.5", "labels": list(labels),
                   "system": host_system or {}}],
        "system_defaults": defaults or {},
    })


def test_gpu_box_fields() -> None:
    fields = {k: d.value for k, d in detected_fields(facts("gpu-box")).items()}
    assert fields["accelerators_per_node"] == 8
    assert fields["accelerator_model_name"] == "NVIDIA H100 80GB HBM3"
    assert fields["accelerator_memory_configuration"] == "HBM3"  # read from the model name
    assert fields["accelerator_interconnect"] == "NVLink"
    assert fields["host_processors_per_node"] == 2 and fields["host_processor_core_count"] == 48
    assert fields["framework"] == "TensorRT 8.6.3, PyTorch 2.3.0a0+6ddf5cf85e.nv24.3"
    assert str(fields["other_software_stack"]).endswith(
        "Docker 26.1.3 (containerd 1.6.32, runc 1.1.12), NVIDIA driver 550.54.15")
    assert fields["boot_firmware_version"] == "BIOS 1.5 (11/02/2023)"


def test_cpu_only_system_gets_accelerator_values_the_checker_accepts() -> None:
    fields = detected_fields(facts("server-2s"))
    assert fields["accelerators_per_node"].value == "0"  # truthy, and int("0") works
    for name in ("accelerator_model_name", "accelerator_memory_capacity",
                 "accelerator_host_interconnect", "accelerator_interconnect",
                 "accelerator_memory_configuration"):
        assert fields[name].value == "N/A"


def test_jetson_shares_host_memory() -> None:
    fields = detected_fields(facts("jetson-orin"))
    assert fields["accelerator_memory_capacity"].value == "shared with the host (61.4 GiB)"
    assert fields["accelerator_interconnect"].value == "N/A"
    assert fields["host_memory_configuration"].value is None
    assert "no SMBIOS" in str(fields["host_memory_configuration"].note)


def test_unknown_accelerators_are_gaps_not_cpu_only() -> None:
    broken = facts("lab-vm").model_copy(update={"accelerators": accelerators.AcceleratorInfo(
        vendor="unknown", gap="`nvidia-smi` exited 9: couldn't communicate with the driver")})
    fields = detected_fields(broken)
    assert fields["accelerators_per_node"].value is None
    assert "couldn't communicate" in str(fields["accelerator_model_name"].note)


def test_merge_writes_every_key_with_numbers_the_report_needs() -> None:
    description = merge(detected_fields(facts("gpu-box")), inventory(HUMAN), "box")
    system = description.system
    assert set(system_fields.REQUIRED) <= set(system)
    assert set(system_fields.POWER) <= set(system)
    for name in ("number_of_nodes", "accelerators_per_node", "host_processors_per_node"):
        assert int(system[name]) >= 1
    assert check(description) == []


def test_merge_precedence_and_sources() -> None:
    inv = inventory({"cooling": "liquid", "host_memory_capacity": "1536 GB"},
                    {"submitter": "Acme", "cooling": "air", "system_type": "edge"},
                    labels=("datacenter",))
    description = merge(detected_fields(facts("gpu-box")), inv, "box",
                        campaign={"division": "open"})
    s = description.sources
    assert (description.system["cooling"], s["cooling"].origin) == (
        "liquid", "hosts[1].system.cooling")
    assert (s["submitter"].source, s["submitter"].origin) == (
        "configured", "system_defaults.submitter")
    assert (description.system["division"], s["division"].origin) == (
        "open", "campaign.division")
    assert description.system["system_type"] == "edge"  # system_defaults beats labels
    assert s["host_memory_capacity"].detected == "1.5 TB"  # the override keeps what was found
    assert s["host_processor_model_name"].source == "detected"
    assert s["hw_notes"].source == "default"
    assert (s["status"].source, description.system["status"]) == ("missing", "")


def test_labels_give_system_type() -> None:
    description = merge({}, inventory(labels=("edge", "datacenter")), "box")
    assert description.system["system_type"] == "edge,datacenter"
    assert description.sources["system_type"].origin == "hosts[1].labels"
    assert description.key_for("system_type") == "hosts[1].system.system_type"


def test_zero_is_written_as_a_string() -> None:
    description = merge({}, inventory({**HUMAN, "accelerators_per_node": 0,
                                       "number_of_nodes": "2"}), "box")
    assert description.system["accelerators_per_node"] == "0"
    assert description.system["number_of_nodes"] == 2


def test_preflight_names_the_key_to_set_for_an_empty_required_field() -> None:
    host_system = {k: v for k, v in HUMAN.items() if k != "cooling"}
    description = merge(detected_fields(facts("gpu-box")), inventory(host_system), "box")
    problems = check(description)
    assert [(p.field, p.key) for p in problems] == [("cooling", "hosts[1].system.cooling")]
    assert str(problems[0]) == "host 'box': cooling is empty; set `hosts[1].system.cooling`"
    with pytest.raises(ConfigError) as raised:
        preflight([description], Mode.SUBMISSION, Path("/lab/hosts.yaml"))
    assert "1 field(s) to set in /lab/hosts.yaml" in str(raised.value)
    assert "hosts[1].system.cooling" in str(raised.value)
    assert raised.value.exit_code == 2


def test_preflight_lists_every_problem_and_only_warns_in_short_mode() -> None:
    host_system = {"system_name": "TBD", "cooling": "", "number_of_nodes": "two",
                   "system_type": "edge, datacenter"}
    no_image = facts("lab-vm").model_copy(update={"software": ()})
    description = merge(detected_fields(no_image), inventory(host_system), "box")
    problems = preflight([description], Mode.SHORT)  # no exception
    found = {p.field: (p.issue, p.key) for p in problems}
    assert found["system_name"] == ("is a placeholder ('TBD')", "hosts[1].system.system_name")
    assert found["submitter"] == ("is empty", "system_defaults.submitter")
    assert found["division"][1] == "system_defaults.division"
    assert found["number_of_nodes"][0].startswith("must be a whole number")
    assert "no spaces" in found["system_type"][0]
    assert found["cooling"][1] == "hosts[1].system.cooling"
    # dmidecode did not run on the lab VM sample: the gap says why, and where to fill it in.
    assert found["host_memory_configuration"] == (
        "is empty (dmidecode lists no populated memory devices)",
        "hosts[1].system.host_memory_configuration")
    assert found["framework"][0] == "is empty (no benchmark image given to look inside)"
    with pytest.raises(ConfigError) as raised:
        preflight([description], Mode.SUBMISSION)
    assert f"{len(problems)} field(s) to set" in str(raised.value)


def test_preflight_value_rules() -> None:
    bad = merge(detected_fields(facts("gpu-box")),
                inventory({**HUMAN, "status": "Released", "division": "network"}), "box")
    found = {p.field: p.issue for p in check(bad)}
    assert "not one of available, preview, rdi" in found["status"]
    assert found["is_network"] == "must be \"true\" in the network division"
    closed = merge(detected_fields(facts("gpu-box")), inventory({**HUMAN, "is_network": "true"}),
                   "box")
    assert {p.field for p in check(closed)} == {"is_network"}


def test_write(tmp_path: Path) -> None:
    description = merge(detected_fields(facts("gpu-box")), inventory(HUMAN), "box")
    system_path, sources_path = write(description, tmp_path / "systems", "acme_h100")
    assert system_path.name == "acme_h100.json"
    assert json.loads(system_path.read_text()) == description.system
    sources = json.loads(sources_path.read_text())
    assert sources["fields"]["cooling"] == {"source": "configured",
                                            "origin": "hosts[1].system.cooling"}
    assert sources["fields"]["accelerator_model_name"]["source"] == "detected"
