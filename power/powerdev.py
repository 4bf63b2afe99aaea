"""The official power-dev checkout and its server on the director, driven through Host.

power-dev is an external, hash-pinned tool: subrun never edits, patches or imports it. Before
use, the sha1 of every `*.py` under `ptd_client_server/` (skipping cache directories) must
equal one entry of the round's `sources_checksums.json`, the same rule the compliance checker
applies to client.json and server.json. The server is started detached on the director with a
generated INI, health-checked through its log (NTP synchronised, PTDaemon probed, listening),
and stopped with SIGINT, which it handles by restoring ranges and stopping PTDaemon.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lab.errors import PowerError
from lab.host import Detached, Host

SERVER_START_TIMEOUT_S = 90.0  # NTP plus PTDaemon's start-up probe (up to 30 s on a WT333E)

# Runs on the host holding the checkout; prints {relative path: sha1} as JSON.
_HASH_SCRIPT = r"""
import hashlib, json, os, sys
base = os.path.join(sys.argv[1], "ptd_client_server")
if not os.path.isdir(base):
    sys.exit("no ptd_client_server directory in " + sys.argv[1])
found = {}
for root, dirs, files in os.walk(base):
    dirs[:] = [d for d in dirs if d not in ("__pycache__", ".mypy_cache", ".pytest_cache")]
    for name in files:
        if name.endswith(".py"):
            path = os.path.join(root, name)
            key = os.path.relpath(path, base).replace(os.sep, "/")
            with open(path, "rb") as f:
                found[key] = hashlib.sha1(f.read()).hexdigest()
print(json.dumps(found, sort_keys=True))
"""


def source_hashes(host: Host, checkout: str, python: str) -> dict[str, str]:
    """sha1 of every power-dev client/server source file, keyed as power-dev keys them."""
    result = host.run([python, "-c", _HASH_SCRIPT, checkout], check=False, timeout_s=120)
    if not result.ok:
        raise PowerError(f"Could not hash the power-dev checkout {checkout} on host "
                         f"'{host.name}': {result.tail(3)}")
    return dict(json.loads(result.stdout))


def verify_checkout(host: Host, checkout: str, python: str,
                    allowed: list[dict[str, str]] | None = None) -> dict[str, str]:
    """The checkout's source hashes, if they equal an allowed entry; else a PowerError."""
    found = source_hashes(host, checkout, python)
    if allowed is None:
        text = host.read_text(f"{checkout}/compliance/sources_checksums.json")
        allowed = list(json.loads(text))
    if any(found == entry for entry in allowed):
        return found
    closest = min(allowed, key=lambda e: len(set(e.items()) ^ set(found.items())))
    changed = sorted(k for k in found.keys() & closest.keys() if found[k] != closest[k])
    added = sorted(found.keys() - closest.keys())
    missing = sorted(closest.keys() - found.keys())
    raise PowerError(
        f"The power-dev checkout {checkout} on host '{host.name}' is not an official one: "
        f"changed {changed or 'none'}, added {added or 'none'}, missing {missing or 'none'}. "
        "The checker accepts only the unmodified sources of the round's commit: check out "
        "that commit afresh (git checkout with LF line endings) and add nothing under "
        "ptd_client_server/.")


@dataclass(frozen=True)
class ServerPlan:
    """Everything the power-dev server's INI needs, and where it runs."""

    analyzer: str  # analyzer name, for the detached process name
    checkout: str  # power-dev checkout on the director
    python: str
    ptd: str  # SPEC PTDaemon (subrun's daemon launcher for dry runs only)
    listen_address: str
    port: int
    ntp_server: str
    device_type: int
    device_port: str
    network_port: int
    interface_flag: str = ""


def server_conf(plan: ServerPlan) -> str:
    """The server INI with the `[analyzer1]` section current power-dev requires."""
    return (f"[server]\nntpServer: {plan.ntp_server}\n"
            f"listen: {plan.listen_address} {plan.port}\n\n"
            f"[ptd]\nptd: {plan.ptd}\nanalyzerCount: 1\n\n"
            f"[analyzer1]\ndeviceType: {plan.device_type}\n"
            f"interfaceFlag: {plan.interface_flag}\ndevicePort: {plan.device_port}\n"
            f"networkPort: {plan.network_port}\n")


@dataclass(frozen=True)
class PowerServer:
    """A running power-dev server on the director."""

    host: Host
    handle: Detached
    plan: ServerPlan
    sources: dict[str, str]
    identity: str  # PTDaemon's Identify reply from the start-up probe

    def log(self) -> str:
        """The server's log so far."""
        return self.host.detached_log(self.handle)


def server_name(analyzer: str) -> str:
    """The detached process name of power-dev's server for the analyzer on the director."""
    return f"power-server-{analyzer}"


def start_power_server(director: Host, plan: ServerPlan,
                       allowed: list[dict[str, str]] | None = None) -> PowerServer:
    """Verify the checkout, write the INI, start the server and wait until it serves."""
    sources = verify_checkout(director, plan.checkout, plan.python, allowed)
    name = server_name(plan.analyzer)
    conf = conf_path(director, plan)
    with tempfile.TemporaryDirectory() as scratch:
        local = Path(scratch) / "server.conf"
        local.write_text(server_conf(plan))
        director.put(local, conf)
    handle = director.start_detached(
        [plan.python, f"{plan.checkout}/ptd_client_server/server.py", "-c", conf],
        name=name, cwd=plan.checkout)
    log = _wait_serving(director, handle, plan)
    return PowerServer(director, handle, plan, sources, ptd_identity(log))


def conf_path(director: Host, plan: ServerPlan) -> str:
    """Where the server's INI lies on the director."""
    return str(PurePosixPath(director.work_dir) / "power" / plan.analyzer / "server.conf")


IDENTIFY_CONTEXT_LINES = 20  # where the reply to Identify is looked for after the request


def logged_identity(director: Host, handle: Detached) -> str:
    """PTDaemon's Identify reply from the server's log, searched on the director: the log holds
    every sample the server read, so it is never copied whole."""
    lines: list[str] = []  # the lines that follow, whatever the output cap keeps of them

    def take(line: str) -> None:
        if len(lines) <= IDENTIFY_CONTEXT_LINES:
            lines.append(line[:4096])

    director.run(["grep", "-F", "-m", "1", "-A", str(IDENTIFY_CONTEXT_LINES),
                  "is sending to ptd: 'Identify'", handle.log_path], check=False, timeout_s=60,
                 on_output=take)
    return ptd_identity("\n".join(lines))


def ptd_identity(server_log: str) -> str:
    """PTDaemon's reply to Identify, as the server logged it."""
    lines = server_log.splitlines()
    for i, line in enumerate(lines):
        if "is sending to ptd: 'Identify'" in line:
            for later in lines[i + 1:]:
                found = re.search(r"recieved reply from ptd: '(.*)'$", later)  # sic, power-dev
                if found:
                    return found.group(1)
    return ""


def stop_power_server(server: PowerServer, timeout_s: float = 40.0) -> None:
    """SIGINT the server (a graceful stop: ranges restored, PTDaemon stopped), then harder."""
    host, handle = server.host, server.handle
    # the server itself is the wrapper's child; SIGINT to its wrapper would become SIGTERM
    host.stop_detached(handle, signal="INT", reach="children")
    if host.wait_detached(handle, timeout_s=timeout_s).running:
        host.stop_detached(handle)
        if host.wait_detached(handle, timeout_s=15).running:
            host.stop_detached(handle, signal="KILL")


def _wait_serving(director: Host, handle: Detached, plan: ServerPlan) -> str:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        log = director.detached_log(handle)
        if "Ready to accept connections" in log:
            if "connected to PTDaemon" not in log:
                raise PowerError(f"power-dev's server on '{director.name}' listens but never "
                                 "reached PTDaemon; see its log.")
            return log
        status = director.poll_detached(handle)
        if not status.running:
            tail = "\n".join(log.splitlines()[-12:])
            raise PowerError(f"power-dev's server on '{director.name}' exited with status "
                             f"{status.exit_status} while starting (NTP at "
                             f"{plan.ntp_server}, PTDaemon {plan.ptd}):\n{tail}")
        time.sleep(0.5)
    stop_power_server(PowerServer(director, handle, plan, {}, ""))
    raise PowerError(f"power-dev's server on '{director.name}' did not become ready within "
                     f"{SERVER_START_TIMEOUT_S:g} s; see {handle.log_path}.")
