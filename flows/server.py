"""A local Prefect server on loopback for deployments, schedules and workers.

Ephemeral mode (a plain flow call) needs nothing; `prefect deployment run`, `--watch` and the
nightly schedule need a real server. subrun starts one in its own PREFECT_HOME, records its pid
with its start time and command line (lab.pidfile), waits until /api/health answers, and stops it
by that pid only while the process there is still the one it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests

from flows.environment import configure_prefect, subrun_home
from lab import pidfile
from lab.errors import SubrunError

DEFAULT_PORT = 4200
SERVER_WORDS = ("prefect", "server", "start")  # in the command line of the server we start


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
    ours = _recorded(port)
    if healthy(port) and ours is not None:
        return LocalServer(port, ours.pid)
    if healthy(port):
        raise SubrunError(f"Something already answers as a Prefect API on 127.0.0.1:{port} but "
                          "was not started by subrun; use it by exporting PREFECT_API_URL="
                          f"http://127.0.0.1:{port}/api, or pick another --port.")
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log = pid_file.with_suffix(".log")
    env = {**os.environ, "PREFECT_SERVER_API_HOST": "127.0.0.1"}
    env.pop("PREFECT_API_URL", None)
    argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
            "--port", str(port)]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    pidfile.write(pid_file, proc.pid, argv)
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
    """Stop the server subrun started on port (by its recorded pid); False if none was running.

    A stale pid file (the server ended, and its pid may now be another process) is removed
    without signalling anything."""
    proc = _recorded(port)
    pidfile.remove(_pid_file(port))
    if proc is None:
        return False
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its workers
        proc.wait(timeout=20)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        if proc.is_running():  # still the same process (psutil compares its start time)
            os.killpg(proc.pid, signal.SIGKILL)
    return True


def _recorded(port: int) -> psutil.Process | None:
    """The server subrun started on port, if that very process still runs."""
    record = pidfile.read(_pid_file(port))
    return pidfile.process(record, SERVER_WORDS) if record else None
