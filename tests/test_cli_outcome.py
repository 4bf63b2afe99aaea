"""`subrun run` as a user runs it, on a lab host, when a run fails: it exits 1, prints "N of M
runs passed.", a `failed:` line naming the run and LoadGen's reason, and a `not run:` line for
the compliance test whose performance run never passed, with why; no tree is assembled. (No
accuracy run in the campaign: TEST01, which needs one, is not planned.)"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from tests.support.campaigns import write_campaign
from tests.support.prefect_home import fresh_home

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parent.parent
SUBRUN = ROOT / ".venv" / "bin" / "subrun"
# Far above what digits answers on one core within 15 ms: LoadGen judges the run INVALID
# (latency), and a second or two of queries is enough to show it.
OVERLOADED = {"target_qps": 200000, "min_duration": 1000, "min_query_count": 4000}


def update(path: Path, **fields: object) -> None:
    """Set top-level fields of a campaign file."""
    path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()) | fields, sort_keys=False))


def subrun_run(path: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """`subrun run CAMPAIGN` as a user types it, without a Prefect server, in folder."""
    env = {**os.environ, "PREFECT_HOME": str(fresh_home(folder / "prefect")), "COLUMNS": "300",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run([str(SUBRUN), "run", str(path)], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=600, check=False)


def test_a_failed_run_exits_1_naming_it_and_the_test_it_left_unrun(
        lab_dir: Path, tmp_path: Path) -> None:
    name = f"exit-{uuid.uuid4().hex[:6]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"],
                          scenarios=("Server",), compliance=True, accuracy=False,
                          settings={"Server": OVERLOADED})
    update(path, max_reruns=0)  # the verdict stands: no automatic re-run at a lower target
    done = subrun_run(path, tmp_path)
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown[-4000:]
    lines = done.stdout.splitlines()
    summary = [line for line in lines if re.fullmatch(r"\d+ of \d+ runs passed\.", line)]
    assert summary == ["0 of 2 runs passed."], shown[-4000:]  # performance, TEST04
    failed = [line for line in lines if line.startswith("failed: ")]
    assert len(failed) == 1 and failed[0].startswith(
        "failed: h2/digits/Server/performance: "), failed
    assert "INVALID" in failed[0], failed  # LoadGen's judgement, in the line
    not_run = [line for line in lines if line.startswith("not run: ")]
    assert len(not_run) == 1, lines
    label, why = not_run[0].removeprefix("not run: ").split(": ", 1)
    assert label == "h2/digits/Server/TEST04", not_run
    assert "performance run of h2/digits/Server, which did not pass" in why, not_run
    assert "No result passed every run it needs" in done.stdout
    assert not (tmp_path / "out" / name / "submission.tar.gz").exists()


def test_a_seed_in_a_submission_campaign_is_refused_before_any_host_is_touched(
        lab_dir: Path, tmp_path: Path) -> None:
    """Submission mode on h2, as a user starts it: a LoadGen seed in the settings is refused
    (exit 2, naming the key) before the campaign begins."""
    name = f"submit-{uuid.uuid4().hex[:6]}"
    path = write_campaign(tmp_path, name, lab_dir / "hosts.yaml", ["h2"], accuracy=False,
                          mode="submission", settings={"Offline": {"qsl_rng_seed": 1234}})
    update(path, division="closed")
    seeded = subrun_run(path, tmp_path)
    assert seeded.returncode == 2, seeded.stdout + seeded.stderr
    assert ("user.conf key '*.Offline.qsl_rng_seed' overrides an official LoadGen setting"
            in seeded.stderr), seeded.stderr
    assert not (tmp_path / "out" / name).exists()  # refused before the campaign began


def test_a_placeholder_system_field_refuses_a_submission_campaign_before_any_run(
        lab_dir: Path, tmp_path: Path) -> None:
    """Submission mode on h2 whose hosts.yaml says `system_name: TBD`: once the hosts are
    described, the campaign stops (exit 2) with one error naming the file, the host, the field
    and the key to set, and no run has started."""
    inventory = yaml.safe_load((lab_dir / "hosts.yaml").read_text())
    index = next(i for i, h in enumerate(inventory["hosts"]) if h["name"] == "h2")
    inventory["hosts"][index]["system"] = {"system_name": "TBD"}
    hosts_yaml = tmp_path / "hosts.yaml"
    hosts_yaml.write_text(yaml.safe_dump(inventory, sort_keys=False))
    name = f"undescribed-{uuid.uuid4().hex[:6]}"
    path = write_campaign(tmp_path, name, hosts_yaml, ["h2"], accuracy=False,
                          mode="submission")
    refused = subrun_run(path, tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr
    assert "The system description is not ready for a submission" in refused.stderr
    assert str(hosts_yaml) in refused.stderr, refused.stderr
    assert (f"host 'h2': system_name is a placeholder ('TBD'); set "
            f"`hosts[{index}].system.system_name`") in refused.stderr, refused.stderr
    store = tmp_path / "out" / name / "store"
    assert not store.exists() or not list(store.rglob("run.json"))  # no run started
