"""A local Prefect server on loopback for deployments, schedules and workers.

Ephemeral mode (a plain flow call) needs nothing; `prefect deployment run`, `--watch` and the
nightly schedule need a real server. subrun starts one in its own PREFECT_HOME, records its pid,
waits until /api/health answers, and stops it by that pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from flows.environment import configure_prefect, subrun_home
from lab.errors import SubrunError

DEFAULT_PORT = 4200


@dataclass(frozen=True)
class LocalServer:
    port: int
    pid: int

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"


def _pid_file(port: int) -> Path:
    return subrun_home() / f"prefect-server-{port}.pid"


def healthy(port: int) -> bool:
    """True when a Prefect API answers on 127.0.0.1:port."""
    try:
        return requests.get(f"http://127.0.0.1:{port}/api/health", timeout=2).ok
    except requests.RequestException:
        return False


def start(port: int = DEFAULT_PORT, *, timeout_s: float = 120) -> LocalServer:
    """Start (or find running) a Prefect server on 127.0.0.1:port and wait until it answers."""
    configure_prefect()
    pid_file = _pid_file(port)
    if healthy(port) and pid_file.exists():
        return LocalServer(port, int(pid_file.read_text()))
    if healthy(port):
        raise SubrunError(f"Something already answers as a Prefect API on 127.0.0.1:{port} but "
                          "was not started by subrun; use it by exporting PREFECT_API_URL="
                          f"http://127.0.0.1:{port}/api, or pick another --port.")
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log = pid_file.with_suffix(".log")
    env = {**os.environ, "PREFECT_SERVER_API_HOST": "127.0.0.1"}
    env.pop("PREFECT_API_URL", None)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
    pid_file.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if healthy(port):
            return LocalServer(port, proc.pid)
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    stop(port)
    raise SubrunError(f"The Prefect server on 127.0.0.1:{port} did not come up within "
                      f"{timeout_s:.0f} s; its log is {log}.")


def stop(port: int = DEFAULT_PORT) -> bool:
    """Stop the server subrun started on port (by its recorded pid); False if none was running."""
    pid_file = _pid_file(port)
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)
    return True
