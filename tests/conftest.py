"""Shared fixtures. Tests marked `lab` use the real test lab (`python3 scripts/testlab.py up`);
tests marked `slow` run real parts that need no root but take seconds (`make quick` skips both)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import pytest
import yaml

from lab.config import HostConfig, Inventory, load_inventory
from lab.errors import SubrunError
from lab.host import Detached, Host
from lab.transport import open_host
from testkit.official import missing
from tests.support.controller_cores import controller_off
from tests.support.power_inventory import running_lab_daemons, stop_lab_daemon
from tests.support.prefect_home import seeded_database

ROOT = Path(__file__).resolve().parent.parent
# The CLI's consoles (flows.cli_common) take their width when they are made, at import: without a
# terminal (a pytest-xdist worker) that is 80 columns, and tables the tests read would wrap.
os.environ.setdefault("COLUMNS", "200")
LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
# Modules whose tests drive real LoadGen runs, subrun's power daemon with a simulated analyzer,
# the Prefect test harness, hostile SSH servers or the official scripts: seconds per test.
SLOW_MODULES = {
    "test_automation", "test_bad_input", "test_compliance", "test_digits_model",
    "test_hostile_target", "test_loadgen_log", "test_power_daemon", "test_power_dev",
    "test_power_session", "test_power_status", "test_private_api",
    "test_settle", "test_submission_checker", "test_submission_precheck",
    "test_submission_report", "test_submission_tree", "test_verdict",
}

# Modules whose tests compare timings (compliance's +-10 %, tuning's probes and confirmations):
# `scripts/suite.py` runs them alone, before the parallel workers start, so no other test's load
# moves what they measure (a single test says so with `@pytest.mark.serial`). Fault tests kill
# only the sshd sessions of their own links (tests/support/sshd_sessions.py).
# test_verdict's valid Server run meets a latency bound on the controller's own cores, which the
# host-free tests beside the serial part keep busy.
SERIAL_MODULES = {"test_compliance", "test_compliance_campaign", "test_tuning_sizing_lab",
                  "test_verdict"}

# Lab tests that compare no timing, run in a lane of their own beside the serial part, on the
# controller's cores (`scripts/suite.py`): their SSH hosts pin their containers there
# (SUBRUN_LANE_CORES), so h2's own core stays the timing tests'. The training campaign killed
# mid-run (90 s) stays in the lab part: with it the lanes beside the serial part outlasted the
# start of its last test's 60-s Server run (LAST), which needs them ended.
BESIDE_TESTS = {"test_a_training_campaign_on_two_systems",
                "test_a_host_that_holds_two_training_runs_at_once_runs_them_side_by_side"}

# Host-free modules that mostly wait (power-dev's fixed pauses, a lease's time bounds): a lane of
# their own beside the other host-free tests, on the same cores, which they leave nearly idle.
WAITING_MODULES = {"test_power_dev", "test_lease"}

# The longest modules (each 100-300 s under the parallel phase's load), started first so that
# none of them is left running alone at the end while the other workers idle. The compliance
# campaign leads the serial part: its Server runs then end before the lane beside it changes
# from the host-free tests to the `beside` lab tests, whose start (an image built and shipped
# by engines no lane pins) spills onto h2's core and failed every Server run there for a minute.
LONGEST_FIRST = (
    "test_compliance_campaign", "test_deployment", "test_power_hosts", "test_deployment_states",
    "test_power_official_campaign", "test_tuning_lab", "test_link_campaign", "test_resume",
    "test_settle", "test_execute", "test_telemetry_lab", "test_cli_outcome",
    "test_power_official_reattach", "test_controller_kills", "test_training_lab", "test_native",
    "test_cancel", "test_lease_lab", "test_flow", "test_slots", "test_power_campaign",
)


# Run last in their part: the tuned 60-s Server run holds its latency bound only when nothing
# else stalls h2's core for long (one stall of half a second fails a Server run at any load), and
# by then the host-free tests beside the serial part have ended.
LAST = {"test_a_tuned_server_run_of_60_s_is_valid_at_the_first_attempt"}

# fixtures that need the test lab up, and the one that starts a Prefect API (seconds)
LAB_FIXTURES = {"lab_dir", "lab_inventory", "ssh_config", "any_host"}
PREFECT_FIXTURES = {"prefect_api"}
_DAEMONS_BEFORE = pytest.StashKey[set[Detached]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark by what a test uses, so `make quick` (not lab, not slow) needs neither the lab nor
    a Prefect server, whatever its module says. The lab part hands whole modules to its
    pytest-xdist workers (`--dist loadfile`), longest first, so a module's fixtures (a Prefect
    server, a provisioned image) are made once."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # stable: the order is kept within a module
    items.sort(key=lambda item: (item.name in LAST, rank.get(item.path.stem, len(rank))))
    for item in items:
        if item.path.stem in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        if getattr(item, "originalname", item.name) in BESIDE_TESTS:
            item.add_marker(pytest.mark.beside)
        if item.path.stem in WAITING_MODULES:
            item.add_marker(pytest.mark.waits)
        used = set(getattr(item, "fixturenames", ()))
        if item.path.stem in SLOW_MODULES or used & PREFECT_FIXTURES:
            item.add_marker(pytest.mark.slow)
        if used & LAB_FIXTURES:
            item.add_marker(pytest.mark.lab)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test of an official tool fails when the tool is missing: a silent skip would let a
    run without the official judges look like a pass."""
    for mark in item.iter_markers("official"):
        if why := missing(mark.args[0]):
            pytest.fail(why, pytrace=False)


def _lab_inventory_or_none() -> Inventory | None:
    try:
        return load_inventory(LAB / "hosts.yaml") if (LAB / "hosts.yaml").exists() else None
    except SubrunError:
        return None  # the lab's own fixtures name what is wrong with it


def _is_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker: session hooks there see only that worker's share."""
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note the lab's power daemons already running (a campaign of the same checkout measuring
    meanwhile): the end of the session leaves them alone."""
    if _is_worker(session.config):
        return
    inventory = _lab_inventory_or_none()
    try:
        before = running_lab_daemons(inventory) if inventory else set()
    except SubrunError:
        before = set()
    session.config.stash[_DAEMONS_BEFORE] = before


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The lab's power daemons outlive the campaigns that start them (by design: the next run
    reuses them); a test session stops the ones it started, so it leaves no process listening
    on the analyzers' ports. Only the controlling process does it, once every worker is done:
    a worker that finished early would stop a daemon another worker's campaign is using."""
    if _is_worker(session.config) or (inventory := _lab_inventory_or_none()) is None:
        return
    if os.environ.get("SUBRUN_TEST_LANE"):
        return  # a lane beside another session, whose campaigns may be using them
    if "not lab" in (session.config.option.markexpr or ""):
        return  # it started none, and the ones running may be a lab session's beside it
    before = session.config.stash.get(_DAEMONS_BEFORE, set())
    try:
        for analyzer in inventory.analyzers:
            stop_lab_daemon(inventory, analyzer.name, unless=before)
    except SubrunError as e:
        print(f"\nthe lab's power daemons were not stopped: {e}")


# Server services the flows of the tests never need (they run flows in process: no schedule, no
# work pool, no paused run), off in the test harness's server: idle, a server with every
# service costs 3.7-3.9 core-s a minute, and 2.3 with these off. The triggers service is kept
# for the sessions that hold a test of an automation (TRIGGER_MODULES).
IDLE_SERVICES = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "DB_VACUUM",
                 "EVENT_LOGGER", "CLEANUP_RECONCILER")
TRIGGER_MODULES = {"test_automation"}


def _services_off(session: pytest.Session) -> dict[str, str]:
    """The environment that turns off the services this session's harness does not need."""
    names = list(IDLE_SERVICES)
    if not any(item.path.stem in TRIGGER_MODULES for item in session.items):
        names.append("TRIGGERS")
    return {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in names}


@pytest.fixture(scope="session")
def prefect_api(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A real Prefect API for the flows of the tests (Prefect's own test harness), started once:
    its start costs 15-30 s. Tests name their campaigns, slots and events apart, so they share
    it. Its database starts as a copy of the seeded one (tests/support/prefect_home.py), in the
    folder the harness would have made, so the server skips migrations."""
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(tmp_path_factory.mktemp("results"))
    from prefect.testing.utilities import prefect_test_harness

    folder = tmp_path_factory.mktemp("prefect-api")
    seeded_database(folder, "prefect-test.db")  # the name the harness gives its database
    with (pytest.MonkeyPatch.context() as env,
          patch("prefect.testing.utilities.mkdtemp", return_value=str(folder))):
        for name, value in _services_off(request.session).items():
            env.setenv(name, value)  # read by the harness's server process as it starts
        with prefect_test_harness(server_startup_timeout=180):
            env.undo()  # not by the servers the tests start themselves
            yield


@pytest.fixture(scope="session")
def lab_dir(request: pytest.FixtureRequest) -> Path:
    """The test lab as this test process sees it. Each pytest-xdist worker, and each lane
    `scripts/suite.py` runs beside another (SUBRUN_TEST_LANE), is a lane of its own: its SSH
    hosts keep their work_dir in a folder of the lane's (`<work_dir>/<lane>`), so the host
    leases (lab.lease) of one lane's campaigns never make another lane's wait, as two labs on
    one machine would not; runs, images and cores are the lab's, shared as before, unless the
    lane has cores of its own (SUBRUN_LANE_CORES, e.g. "0"), where its SSH hosts' containers
    run. Tests of the leases run their campaigns within one test, on one lane."""
    worker = getattr(request.config, "workerinput", {}).get("workerid")
    names = [n for n in (os.environ.get("SUBRUN_TEST_LANE"), worker) if n]
    if not names or not (LAB / "hosts.yaml").exists():
        return LAB
    name = "-".join(names)
    cores = os.environ.get("SUBRUN_LANE_CORES")
    lane = LAB / "lanes" / name
    lane.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load((LAB / "hosts.yaml").read_text())
    for host in data["hosts"]:
        if host.get("transport", "ssh") != "ssh":
            continue
        host["work_dir"] = f"{host['work_dir']}/{name}"
        docker = host.setdefault("docker", {})
        if cores and docker.get("engine", True):
            docker["cpuset"] = cores
    (lane / "hosts.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    if not (lane / "ssh").exists():
        (lane / "ssh").symlink_to(LAB / "ssh")
    return lane


@pytest.fixture(scope="session")
def lab_inventory(lab_dir: Path) -> Inventory:
    """The test lab's inventory (this worker's lane); a missing lab is an error, never a
    silent skip."""
    if not (LAB / "hosts.yaml").exists():
        pytest.fail(f"The test lab is not up ({LAB / 'hosts.yaml'} missing): run "
                    "`python3 scripts/testlab.py up` or `make test`.")
    return load_inventory(lab_dir / "hosts.yaml")


@pytest.fixture(scope="session")
def ssh_config(lab_inventory: Inventory) -> HostConfig:
    return lab_inventory.host("h2")


@pytest.fixture
def controller_off_h2(lab_inventory: Inventory) -> Iterator[tuple[int, ...]]:
    """For a timing test on h2: this controller kept off the cores h2 pins its runs to."""
    with controller_off(lab_inventory, "h2") as cores:
        yield cores


@pytest.fixture(params=["local", "h2"])
def any_host(request: pytest.FixtureRequest, lab_inventory: Inventory, tmp_path: Path) -> Host:
    """The same contract, once over the local transport and once over real SSH."""
    config = lab_inventory.host(request.param)
    config = config.model_copy(update={"work_dir": str(tmp_path / "work")})
    host = open_host(config)
    yield host
    host.close()


def lab_pid(name: str) -> int:
    """The pid the test lab recorded for one of its processes (e.g. 'h2-sshd')."""
    return int((LAB / "pids" / f"{name}.pid").read_text())
