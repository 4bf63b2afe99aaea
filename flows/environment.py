"""Where subrun keeps its state, and the Prefect settings it needs, set before Prefect loads."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def subrun_home() -> Path:
    """subrun's own data directory (Prefect home, caches): $SUBRUN_HOME or ~/.subrun."""
    return Path(os.environ.get("SUBRUN_HOME", Path.home() / ".subrun"))


def configure_prefect() -> None:
    """Quiet, offline-safe Prefect defaults; the user's own settings and profile win."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # subrun's own loggers (image builds, runs on targets) go to the Prefect run logs too
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "subrun")
    os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
    os.environ.setdefault("PREFECT_RUNNER_POLL_FREQUENCY", "2")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
