"""The deployments of the `submission` flow: full, nightly and edge, served from one process.

    subrun serve            # against PREFECT_API_URL (a `prefect server start` on loopback)
    prefect deployment run submission/full

The same deployments can go to a process work pool instead (`subrun deploy --pool NAME`), for
labs that run workers on several machines.

No deployment is limited to one flow run at a time: hosts, analyzers and campaigns are slots
(`flows.slots`), so campaigns on other hosts run side by side, campaigns sharing a host take
turns run by run, and two flow runs of one campaign take turns on the campaign.
"""

from __future__ import annotations

from typing import Any, cast

from prefect import serve
from prefect.schedules import Cron

from flows.environment import REPO_ROOT
from flows.submission import submission

CAMPAIGNS = REPO_ROOT / "campaigns"
NIGHTLY_CRON = "0 2 * * *"


def deployment_specs(nightly_cron: str = NIGHTLY_CRON,
                     timezone: str = "UTC") -> list[dict[str, Any]]:
    """Name, parameters and schedule of each deployment."""
    return [
        {"name": "full", "parameters": {}, "tags": ["mlperf", "submission"],
         "description": "A whole campaign: the file in campaign_file, else the demo."},
        {"name": "nightly", "tags": ["mlperf", "nightly"],
         "parameters": {"campaign_file": str(CAMPAIGNS / "nightly.yaml"),
                        "track_history": True},
         "schedules": [Cron(nightly_cron, timezone=timezone)],
         "description": "The nightly campaign, kept in the history with trends and alerts."},
        {"name": "edge", "tags": ["mlperf", "edge"],
         "parameters": {"campaign_file": str(CAMPAIGNS / "edge.yaml")},
         "description": "A one-shot campaign on an edge device."},
    ]


def serve_all(nightly_cron: str = NIGHTLY_CRON, timezone: str = "UTC") -> None:
    """Register the deployments and execute their runs until interrupted."""
    deployments = [submission.to_deployment(**spec)
                   for spec in deployment_specs(nightly_cron, timezone)]
    serve(*deployments, limit=4, pause_on_shutdown=False)  # type: ignore[arg-type]


def deploy_to_pool(pool: str, nightly_cron: str = NIGHTLY_CRON, timezone: str = "UTC") -> None:
    """Register the deployments on a process work pool; `prefect worker start` runs them."""
    source = cast(Any, submission.from_source(source=str(REPO_ROOT),
                                              entrypoint="flows/submission.py:submission"))
    for spec in deployment_specs(nightly_cron, timezone):
        source.deploy(work_pool_name=pool, **spec)
