"""Fresh Prefect homes for the tests' `subrun` processes and Prefect servers, seeded with an
empty database already at Prefect's schema, its block types registered.

A new PREFECT_HOME costs its first ephemeral API or server 6-8 core-s of migrations and block
registration (measured: a one-task flow took 16.8 core-s in a new home, 10.7 in a seeded one),
and the suite starts about thirty of them. The seed is made once per Prefect version, by starting
a server on an empty home, and kept in the lab's cache; each test gets a copy of its own, so what
one test's runs write is never seen by another.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".lab" / "cache"
DATABASE = "prefect.db"
MEMO = "memo_store.toml"  # says the block types are registered, so a server skips it
START_AND_STOP = ("from prefect.server.api.server import SubprocessASGIServer\n"
                  "server = SubprocessASGIServer()\n"
                  "server.start(timeout=300)\n"
                  "server.stop()\n")


def seed() -> Path:
    """The folder holding the seeded database and memo, made on first use (one process makes
    it while the others wait on its lock)."""
    folder = CACHE / f"prefect-home-{version('prefect')}"
    if (folder / DATABASE).exists():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "prefect-home.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / DATABASE).exists():
            _make(folder)
    return folder


def _make(folder: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="prefect-seed-", dir=CACHE) as scratch:
        home, made = Path(scratch) / "home", Path(scratch) / "made"
        made.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env |= {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        subprocess.run([sys.executable, "-c", START_AND_STOP], env=env, check=True,
                       capture_output=True, timeout=600)
        with sqlite3.connect(home / DATABASE) as source:  # one file, the WAL folded in
            source.execute("VACUUM INTO ?", (str(made / DATABASE),))
        shutil.copyfile(home / MEMO, made / MEMO)
        made.rename(folder)


def fresh_home(folder: Path) -> Path:
    """folder as a Prefect home, seeded unless it has a database already (a test that starts
    `subrun` again in the same home keeps what the first start wrote); returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / DATABASE).exists():
        source = seed()
        for name in (DATABASE, MEMO):
            shutil.copyfile(source / name, folder / name)
    return folder


def seeded_database(folder: Path, name: str) -> Path:
    """A copy of the seeded database in folder under name (for Prefect's test harness)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(seed() / DATABASE, folder / name)
    return folder / name
