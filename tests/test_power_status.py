"""`subrun power status|stop` on a real daemon: a daemon a campaign left running is listed with
its pid and where it listens, stopped by `stop` (its port closed), and then listed as stopped;
an analyzer hosts.yaml does not name is an error naming the known ones."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from lab.config import load_inventory
from lab.local import LocalHost
from power.daemons import daemon_states
from power.service import ensure_daemon, stop_daemon

SUBRUN = [sys.executable, "-m", "flows"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def subrun(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SUBRUN, *args], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "COLUMNS": "200"})


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_daemon_left_running_is_listed_then_stopped(tmp_path: Path) -> None:
    name, port = f"sim-{uuid.uuid4().hex[:8]}", free_port()
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(yaml.safe_dump({
        "hosts": [{"name": "local", "transport": "local", "work_dir": str(tmp_path / "work")}],
        "analyzers": [{"name": name, "host": "local", "port": port}]}))
    inventory = load_inventory(hosts)
    host = LocalHost("local", str(tmp_path / "work"))
    endpoint = ensure_daemon(host, inventory.analyzers[0], address="127.0.0.1")
    try:
        listed = subrun("power", "status", str(hosts))
        assert listed.returncode == 0, listed.stderr
        row = next(line for line in listed.stdout.splitlines() if name in line)
        assert f"running (pid {endpoint.handle.pid})" in row and f"127.0.0.1:{port}" in row

        stopped = subrun("power", "stop", str(hosts), "--analyzer", name)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped: {name}'s daemon on host 'local' (pid {endpoint.handle.pid}" \
            in stopped.stdout
        assert not listening(port)
        [state] = daemon_states(inventory)
        assert state.state == "stopped" and not state.running
        assert "Nothing was running." in subrun("power", "stop", str(hosts)).stdout
    finally:
        if host.poll_detached(endpoint.handle).running:
            stop_daemon(host, endpoint.handle)

    unknown = subrun("power", "stop", str(hosts), "--analyzer", "nope")
    assert unknown.returncode == 2
    assert f"No analyzer named 'nope' in hosts.yaml (known: {name})" in unknown.stderr
