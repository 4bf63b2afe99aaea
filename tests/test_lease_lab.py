"""Two people run `subrun run` against one lab host at the same moment, with no Prefect server:
the host's lease on the host itself keeps their runs apart, the one that waits says who holds
the host, and both campaigns pass."""

from __future__ import annotations

import itertools
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from bench.campaign import load_campaign
from bench.store import RunStore
from tests.support.campaigns import write_campaign
from tests.support.prefect_home import fresh_home

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent
SUBRUN = ROOT / ".venv" / "bin" / "subrun"


def test_two_campaigns_started_at_once_without_a_server_never_overlap_on_their_host(
        lab_dir: Path, tmp_path: Path) -> None:
    paths, started = [], []
    for who in ("alice", "cron"):
        folder = tmp_path / who
        folder.mkdir()
        paths.append(write_campaign(folder, f"{who}-{uuid.uuid4().hex[:6]}",
                                    lab_dir / "hosts.yaml", ["h2"], accuracy=False,
                                    scenarios=("Offline", "SingleStream")))
        env = {**os.environ, "PREFECT_HOME": str(fresh_home(folder / "prefect")), "COLUMNS": "300",
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env.pop("PREFECT_API_URL", None)
        started.append(subprocess.Popen([str(SUBRUN), "run", str(paths[-1])], env=env,
                                        cwd=folder, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    shown = [p.communicate(timeout=900)[0] for p in started]
    assert [p.returncode for p in started] == [0, 0], [s[-3000:] for s in shown]
    intervals = sorted((r.started_at, r.finished_at, r.spec.label)
                       for p in paths for r in RunStore(load_campaign(p).paths.store).runs())
    assert len(intervals) == 4
    for (_, end, _), (start_next, _, _) in itertools.pairwise(intervals):
        assert end is not None and end <= start_next, intervals
    waited = [line for out in shown for line in out.splitlines()
              if "waiting: host 'h2' (host lease) is held by campaign '" in line]
    assert waited, [s[-3000:] for s in shown]
