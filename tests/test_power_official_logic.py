"""The official power path's pure logic and its plan-time refusal: the campaign's `power:` key,
power-dev's check read from its real output, the verdict built from it, and the one-paragraph
refusal naming the hosts.yaml key to set (on this machine, no lab)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.campaign import Campaign
from bench.run import Check, Verdict
from lab.config import AnalyzerConfig, DirectorConfig, DockerSettings, HostConfig, Inventory
from lab.errors import ConfigError
from power.check_report import IDENTITY_CHECK, parse_check, power_checks, with_power
from power.readiness import check_official, client_checkout
from power.wrap import OfficialWrap
from tests.support.official_power import free_port
from tests.test_power_official_campaign import CHECKOUT, needs_checkout

SAMPLE = Path(__file__).parent / "samples" / "power" / "check_subrun_daemon.txt"
OURS = "YokogawaWT310E,C2PH13047V,subrun-ptd 0.1.0 (not SPEC PTDaemon),version=0.1.0-subrun"


@pytest.mark.parametrize(("power", "mode", "path"), [
    (True, "submission", "official"), (True, "short", "track"), ("official", "short", "official"),
    ("track", "submission", "track"), (False, "submission", None)])
def test_power_key_resolves_by_mode(power: object, mode: str, path: str | None) -> None:
    campaign = Campaign.model_validate({"power": power, "mode": mode,
                                        "hosts": [{"host": "h", "benchmarks": [
                                            {"benchmark": "digits"}]}]})
    assert campaign.power_path == path


def test_power_key_refuses_other_words() -> None:
    with pytest.raises(ValidationError, match=r"did you mean .official."):
        Campaign.model_validate({"power": "offical", "hosts": [
            {"host": "h", "benchmarks": [{"benchmark": "digits"}]}]})


def test_power_devs_check_with_subruns_daemon_passes_but_is_not_submittable() -> None:
    report = parse_check(SAMPLE.read_text())
    assert list(report.failed) == [IDENTITY_CHECK] and len(report.passed) == 10
    assert "not supported" in report.failed[IDENTITY_CHECK]
    checks, submittable = power_checks(report, OURS)
    assert not submittable
    identity = next(c for c in checks if c.name == "ptd_identity")
    assert identity.ok and "not SPEC PTDaemon" in identity.detail and "1.11.1" in identity.detail
    assert checks[0].ok and "10 of 11 checks passed" in checks[0].detail
    verdict = with_power(Verdict(passed=True, submittable=True), checks, submittable,
                         {"power_w": 42.0})
    assert verdict.passed and not verdict.submittable and verdict.metrics["power_w"] == 42.0


def test_identity_failure_of_another_daemon_and_any_other_failure_fail_the_run() -> None:
    text = SAMPLE.read_text()
    report = parse_check(text)
    checks, _ = power_checks(report, "YokogawaWT310E,C2PH13047V,version=1.10.0-abc,...")
    assert not checks[0].ok  # a PTDaemon of the wrong version is not excused
    broken = text.replace("INFO:main:[x] Check results checksum",
                          "ERROR:main:[ ] Check results checksum\nERROR:main:\trun_1/spl.txt "
                          "differs")
    checks, submittable = power_checks(parse_check(broken), OURS)
    failed = [c for c in checks if not c.ok]
    assert not submittable and "'Check results checksum' failed: run_1/spl.txt differs" in \
        failed[-1].detail
    verdict = with_power(Verdict(passed=True, checks=[Check(name="mode", ok=True, detail="")]),
                         checks, submittable, {})
    assert not verdict.passed and "power_check.txt" in verdict.fix
    assert "run_1/spl.txt differs" in verdict.reason


def test_a_check_that_printed_nothing_fails() -> None:
    checks, submittable = power_checks(parse_check("Traceback ...\nKeyError: 'results'\n"), OURS)
    assert not submittable and not checks[0].ok and "no checks" in checks[0].detail


def test_wrap_runs_power_devs_client_around_the_harness() -> None:
    wrap = OfficialWrap(target_checkout="/opt/power-dev", controller_checkout=Path("/x"),
                        director_address="10.0.0.5", director_port=4950, ntp_server="ntp.lab",
                        label="subrun-abc")
    argv = wrap.argv(["python", "-m", "digits_bench", "--scenario", "Offline"])
    assert argv[:2] == ["python3", "/subrun/power-dev/ptd_client_server/client.py"]
    assert argv[argv.index("-w") + 1] == "python -m digits_bench --scenario Offline"
    assert {"-T", "-o", "-L"} <= set(argv) and argv[argv.index("-n") + 1] == "ntp.lab"
    assert wrap.network == "host"
    assert [m.source for m in wrap.mounts] == ["/opt/power-dev", "/etc/services"]


def _inventory(tmp_path: Path, **director: str) -> Inventory:
    hosts = [HostConfig(name="local", transport="local", work_dir=str(tmp_path / "work")),
             HostConfig(name="native", transport="local", work_dir=str(tmp_path / "n"),
                        docker=DockerSettings(engine=False))]
    return Inventory(hosts=hosts, analyzers=[AnalyzerConfig(name="pd-refuse", port=free_port())],
                     director=DirectorConfig(host="local", **director) if director else None)


def _refusal(inventory: Inventory, tmp_path: Path, hosts: list[str] | None = None) -> str:
    where = tmp_path / "hosts.yaml"
    with pytest.raises(ConfigError) as caught:
        check_official(inventory, where, "pd-refuse", hosts or ["local"],
                       client_checkout(inventory, None) or tmp_path)
    text = str(caught.value)
    assert text.startswith(f"{where}: the campaign asks for official power") and "\n" not in text
    assert "`power: track`" in text  # the way out is named too
    return text


def test_refusal_names_the_director_keys(tmp_path: Path) -> None:
    assert "hosts.yaml has no `director:`" in _refusal(_inventory(tmp_path), tmp_path)
    text = _refusal(_inventory(tmp_path, power_dev="/opt/power-dev"), tmp_path)
    assert "set `director.ptd`, `director.ntp_server`" in text
    full = {"power_dev": str(tmp_path), "ptd": "/opt/ptd", "ntp_server": "127.0.0.1"}
    text = _refusal(_inventory(tmp_path, **full), tmp_path, ["native"])
    assert "`hosts[native].docker.engine: true`" in text
    text = _refusal(_inventory(tmp_path, **full), tmp_path)
    assert "set `director.power_dev` to an unmodified checkout" in text


@needs_checkout
def test_refusal_when_power_devs_server_cannot_start_ptdaemon(tmp_path: Path) -> None:
    from tests.support.sntp import SntpServer

    with SntpServer() as ntp:
        inventory = _inventory(tmp_path, power_dev=str(CHECKOUT), ptd=str(tmp_path / "no-ptd"),
                               ntp_server=ntp.address, python=sys.executable)
        inventory = inventory.model_copy(update={"director": inventory.director.model_copy(
            update={"port": free_port()})} if inventory.director else {})
        text = _refusal(inventory, tmp_path)
    assert "power-dev's server could not reach PTDaemon" in text and "`director.ptd`" in text


def test_a_dropped_link_leaves_power_devs_server_serving_for_the_retry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.errors import ConnectionLost, RunError
    from lab.host import Detached
    from lab.local import LocalHost
    from power import official_run
    from power.powerdev import PowerServer

    stopped: list[PowerServer] = []
    monkeypatch.setattr(official_run, "start_power_server", lambda director, plan: PowerServer(
        director, Detached("local", "power-server-pd-fake", "/nowhere", 1), plan, {}, OURS))
    monkeypatch.setattr(official_run, "stop_power_server", stopped.append)
    full = {"power_dev": "/opt/power-dev", "ptd": "/opt/ptd", "ntp_server": "127.0.0.1"}
    inventory = _inventory(tmp_path, **full).model_copy(update={"analyzers": [
        AnalyzerConfig(name="pd-fake", port=free_port())]})
    setup = official_run.OfficialSetup(checkout=tmp_path, lock_dir=tmp_path / "locks")
    sut = LocalHost("local", str(tmp_path / "work"))

    def session_raising(error: Exception) -> None:
        with pytest.raises(type(error)), official_run.director_session(
                inventory, "pd-fake", "lbl", sut=sut, setup=setup):
            raise error

    session_raising(ConnectionLost("link dropped", host="h2", argv=("docker", "wait")))
    assert stopped == []  # the client in the container still talks to it
    session_raising(RunError("the run failed"))
    assert len(stopped) == 1


def test_power_devs_check_runs_through_the_controllers_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check.py's verdict is its exit status and its words; one that cannot start or hangs has
    not passed and says why (LocalHost stops it at the deadline, process group and all)."""
    from power import check_report

    checkout = tmp_path / "power-dev"
    (checkout / "compliance").mkdir(parents=True)
    script = checkout / "compliance" / "check.py"
    script.write_text("import sys\nprint('[x] Check client sources checksum')\n"
                      "print('[ ] Check results checksum', file=sys.stderr)\nsys.exit(1)\n")
    passed, text = check_report.run_check(checkout, tmp_path, sys.executable)
    assert not passed and text == ("[x] Check client sources checksum\n"
                                   "[ ] Check results checksum\n")
    script.write_text("print('[x] Check client sources checksum')\n")
    assert check_report.run_check(checkout, tmp_path, sys.executable)[0]
    passed, text = check_report.run_check(checkout, tmp_path, str(tmp_path / "no-python"))
    assert not passed and "no-python" in text
    script.write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(check_report, "CHECK_TIMEOUT_S", 0.5)
    passed, text = check_report.run_check(checkout, tmp_path, sys.executable)
    assert not passed and "could not run" in text and "0.5 s" in text
