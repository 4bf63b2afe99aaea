"""A Prefect API of one `subrun` command's own, started before the command loads anything.

Without a server, a flow call makes Prefect start a temporary API only when the flow begins:
the command first imports and validates (about 3 s), then Prefect imports its server code into
the command and boots the API in a subprocess (about 3 s more), one after the other. Started
here, the same API (the same uvicorn app, database and settings Prefect's temporary server
uses) boots on another core while the command imports and validates its campaign, and the
command never imports the server code.

It is still a temporary API, not a served one: `flows.holders.server_in_use` tells them apart
(SUBRUN_PRIVATE_API names it), so a campaign behaves exactly as with Prefect's own temporary
server: no slots on a server, no deployment cancellation to watch.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import requests

from lab.errors import SubrunError

PRIVATE = "SUBRUN_PRIVATE_API"  # the URL of the command's own API, when it started one
BACKLOG = 128  # connections the API's socket queues while it boots
STOP_S = 5.0  # how long a stopped API may take to end before it is killed
SETTINGS_OF_THE_API = ("PREFECT_API_URL", "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE")
SETTINGS_FILES = (".env", "prefect.toml", "pyproject.toml")  # read by Prefect in the cwd
_STARTED: dict[str, subprocess.Popen[bytes]] = {}  # this process's own API, by its URL


def is_private(url: str | None) -> bool:
    """Whether url is this command's own API (then no server is in use)."""
    return bool(url) and url == os.environ.get(PRIVATE)


@contextmanager
def private_api() -> Iterator[None]:
    """Start the command's own API now, unless a server is configured; stop it when the
    command ends. The flow waits for it when it first calls the API (`wait_ready`)."""
    if os.environ.get("PREFECT_API_URL") or not _ephemeral_allowed() or _set_elsewhere():
        yield  # Prefect decides, as it would without subrun
        return
    process, url = _start()
    os.environ["PREFECT_API_URL"] = os.environ[PRIVATE] = url
    try:
        yield
    finally:
        _stop(process)
        _STARTED.pop(url, None)
        for name in ("PREFECT_API_URL", PRIVATE):
            if os.environ.get(name) == url:
                del os.environ[name]


def wait_ready(timeout_s: float | None = None) -> None:
    """Return once the command's own API answers (at once when it has none). Meanwhile,
    what Prefect imports lazily at a flow's first call is imported (FastAPI's encoder of the
    flow's parameters, about 0.25 s), which the flow would otherwise wait for after the API."""
    url = os.environ.get(PRIVATE)
    if not url or url != os.environ.get("PREFECT_API_URL"):
        return
    import fastapi.encoders  # noqa: F401
    limit = timeout_s or float(os.environ.get(
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))
    deadline = time.monotonic() + limit
    process = _STARTED.get(url)
    with requests.Session() as session:
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise SubrunError(f"The temporary Prefect API this command started at {url} "
                                  f"exited with status {process.returncode} before it answered "
                                  "(its error is printed above); run the command again, or "
                                  "start a server (`subrun server start`) and export "
                                  "PREFECT_API_URL.")
            try:
                if session.get(f"{url}/health", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
    raise SubrunError(f"The temporary Prefect API this command started at {url} did not "
                      f"answer within {limit:.0f} s; the machine may be overloaded. Raise "
                      "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, or start a server "
                      "(`subrun server start`) and export PREFECT_API_URL.")


@contextmanager
def flow_run_settings() -> Iterator[None]:
    """Prefect's settings for the flow run of this command: on its own API, no heartbeats.
    They let a server notice a crashed flow run, but this API ends with the command, and at
    the flow's end Prefect waits for the heartbeat thread to wake from its one-second nap."""
    if not is_private(os.environ.get("PREFECT_API_URL")):
        yield
        return
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def _ephemeral_allowed() -> bool:
    value = os.environ.get("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "true").strip().lower()
    return value not in ("0", "false", "no", "off")


def _set_elsewhere() -> bool:
    """Whether Prefect may find its API (or whether a temporary one is allowed) somewhere other
    than the environment: the active profile, or a settings file in this directory. Such a
    setting would be hidden by the URL set here, so the command leaves the API to Prefect."""
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")).expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH", home / "profiles.toml"))
    try:
        data = tomllib.loads(profiles.read_text()) if profiles.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return True  # unreadable: whatever it says, Prefect reads it
    active = os.environ.get("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    profile = data.get("profiles", {}).get(active, {})
    if any(key in profile for key in SETTINGS_OF_THE_API):
        return True
    return any(_mentions_api(Path(name)) for name in SETTINGS_FILES)


def _mentions_api(path: Path) -> bool:
    try:
        text = path.read_text(errors="replace") if path.is_file() else ""
    except OSError:
        return True
    return "PREFECT_API_URL" in text or "[api]" in text or "tool.prefect" in text


def _start() -> tuple[subprocess.Popen[bytes], str]:
    """The API's process, serving on a loopback socket bound here and handed to it: the port is
    the API's from the start, so nothing else can take it while the API boots."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(BACKLOG)
        process = _launch(sock.fileno())
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    _STARTED[url] = process
    return process, url


def _launch(fd: int) -> subprocess.Popen[bytes]:
    """Prefect's temporary server, as Prefect starts it (its app factory under uvicorn, the UI
    off), without importing Prefect here."""
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None
    app_dir = Path(spec.origin).parent.parent
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
         "prefect.server.api.server:create_app", "--fd", str(fd), "--log-level", "error",
         "--lifespan", "on"],
        env=env, stdin=subprocess.DEVNULL, pass_fds=(fd,))


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the API once Prefect has sent what it still holds (logs and events go in the
    background): sent later, to an API that is gone, they would be retried for a minute."""
    if process.poll() is not None:
        return
    if "prefect" in sys.modules:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        for worker in (APILogWorker, EventsWorker):
            worker.drain_all(timeout=STOP_S)
    process.terminate()
    try:
        process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
