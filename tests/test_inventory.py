"""hosts.yaml: the shipped default loads, and broken files give one clear message, exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from lab.config import load_inventory
from lab.errors import ConfigError

GOOD_HOST = """\
hosts:
  - name: a
    address: 10.0.0.1
"""

BROKEN = {
    "wrong type": ("hosts:\n  - name: a\n    address: x\n    trust_on_first_use: maybe\n",
                   ":4: hosts[0].trust_on_first_use"),
    "unknown key": ("hosts:\n  - name: a\n    adress: x\n",
                    "did you mean 'address'"),
    "missing key file": ("hosts:\n  - name: a\n    address: x\n    key: keys/nope\n",
                         "no key file at"),
    "duplicate host name": ("hosts:\n  - name: a\n    address: x\n  - name: a\n    address: y\n",
                            "host name 'a' is used by entries 0 and 1"),
    "bad port": ("hosts:\n  - name: a\n    address: x\n    port: 70000\n",
                 ":4: hosts[0].port"),
    "yaml syntax": ("hosts:\n  - name: a\n   address: [x\n", "not valid YAML"),
    "duplicate key": ("hosts:\n  - name: a\n    address: x\n    address: y\n",
                      "appears twice"),
    "ssh without address": ("hosts:\n  - name: a\n", "neither `address:` nor `ssh_alias:`"),
    "no hosts": ("hosts: []\n", "hosts"),
    "unknown transport": ("hosts:\n  - name: a\n    transport: telnet\n", "'local' or 'ssh'"),
    "bad system field": (GOOD_HOST + "    system: {coolling: air}\n", "did you mean 'cooling'"),
    "analyzer on unknown host": (GOOD_HOST + "analyzers:\n  - {name: p, host: b}\n",
                                 "runs on host 'b'"),
    "host power on an unknown analyzer": (
        GOOD_HOST + "    power: {analyzer: sim-wt31e}\n"
        "analyzers:\n  - {name: sim-wt310e, host: a}\n",
        "hosts[0].power.analyzer: host 'a' is measured by analyzer 'sim-wt31e', which is not "
        "under `analyzers:` (did you mean 'sim-wt310e'?)"),
    "host power without analyzers": (GOOD_HOST + "    power: {analyzer: p}\n",
                                     "not under `analyzers:` (there are none)"),
    "bad host name": ("hosts:\n  - name: 'my host'\n    address: x\n", "hosts[0].name"),
    "unknown docker key": (GOOD_HOST + "    docker: {gpu: all}\n", "did you mean 'gpus'"),
    "not a mapping": ("- just\n- a list\n", "its top level is a list"),
}


def test_shipped_default_is_this_machine_with_a_simulated_analyzer() -> None:
    inventory = load_inventory()
    assert [h.transport for h in inventory.hosts] == ["local"]
    assert inventory.analyzers[0].resource == "sim"
    assert inventory.analyzer_for("local") == inventory.analyzers[0]


def test_each_host_is_measured_by_its_own_analyzer(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: a, address: x, power: {analyzer: pa}}\n"
                    "  - {name: b, address: y, power: {analyzer: pb}}\n"
                    "  - {name: c, address: z}\n"
                    "analyzers:\n  - {name: pa, host: a}\n  - {name: pb, host: a, port: 8889}\n")
    inventory = load_inventory(path)
    assert inventory.analyzer_for("a").name == "pa" and inventory.analyzer_for("b").name == "pb"
    with pytest.raises(ConfigError, match=r"Host 'c' has no power analyzer.*"
                                          r"`hosts\[2\]\.power\.analyzer`.*\(pa, pb\)"):
        inventory.analyzer_for("c")


def test_power_campaign_on_a_host_without_analyzer_is_refused_at_plan_time(
        tmp_path: Path) -> None:
    (tmp_path / "hosts.yaml").write_text(
        "hosts:\n  - {name: a, transport: local}\n  - {name: b, address: y}\n"
        "analyzers:\n  - {name: pa, host: a}\n")
    (tmp_path / "c.yaml").write_text(
        "name: c\ninventory: hosts.yaml\nround: v6.1\ndivision: open\nmode: short\n"
        "submitter: X\npower: true\n"
        "hosts:\n  - host: b\n    benchmarks: [{benchmark: digits, scenarios: [Offline]}]\n")
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "c.yaml")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "campaign 'c' asks for power runs on host 'b'" in text
    assert "hosts[1].power.analyzer" in text and "Traceback" not in text


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_inventory_gives_clear_error_and_exit_2(case: str, tmp_path: Path) -> None:
    text, expected = BROKEN[case]
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    message = str(caught.value)
    assert expected in message
    assert str(path) in message
    result = CliRunner().invoke(app, ["hosts", "check", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["hosts", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "file not found" in result.output


def test_several_problems_reported_together(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - name: a\n    address: x\n    port: 0\n    colour: red\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    message = str(caught.value)
    assert "2 problem(s)" in message and ":4:" in message and ":5:" in message


def test_relative_key_path_resolves_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("not really a key")
    path = tmp_path / "hosts.yaml"
    path.write_text(GOOD_HOST + "    key: keys/id\n")
    assert load_inventory(path).hosts[0].key == tmp_path / "keys" / "id"


def test_console_script_exit_code_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(BROKEN["bad port"][0])
    proc = subprocess.run([sys.executable, "-m", "flows", "hosts", "check", str(path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "port" in proc.stderr
