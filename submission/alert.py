"""Regression notices for people: one JSON body per regression, posted to a webhook.

The nightly flow emits `subrun.nightly.regression` events for Prefect automations; this is the
same notice for labs that want a chat or pager webhook without an automation (`subrun alert`).
Only the standard library speaks HTTP here: a notice is one small POST.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from lab.errors import SubrunError
from submission.history import Regression


class AlertError(SubrunError):
    """A webhook did not take a notice."""


def regression_notice(regression: Regression) -> dict[str, Any]:
    """What a notice says: which series dropped, by how much, against which baseline."""
    s = regression.series
    return {
        "event": "subrun.nightly.regression",
        "text": f"subrun nightly regression: {regression.describe()}",
        "host": s.host, "benchmark": s.benchmark, "scenario": s.scenario, "metric": s.metric,
        "baseline": regression.baseline, "latest": regression.latest,
        "change_pct": round(regression.change_pct, 2),
        "recorded_at": s.points[-1].recorded_at.isoformat(),
    }


def post_json(url: str, body: dict[str, Any], *, timeout_s: float = 10.0) -> int:
    """POST body as JSON to url; returns the HTTP status, AlertError when it is not taken."""
    if not url.startswith(("http://", "https://")):
        raise AlertError(f"The webhook address '{url}' is not an http:// or https:// URL.")
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        raise AlertError(f"The webhook {url} refused the notice: HTTP {e.code} {e.reason}.") from e
    except (urllib.error.URLError, OSError) as e:
        raise AlertError(f"Cannot reach the webhook {url}: {getattr(e, 'reason', e)}. Check the "
                         "address, and that the receiver is up.") from e
