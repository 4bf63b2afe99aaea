"""Who may drive subrun's power daemon: loopback by default, a shared token beyond the trusted
networks, a console that stays under its cap; over real TCP with a simulated WT310E."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from lab.config import AnalyzerConfig, HostConfig, load_inventory
from lab.errors import ConfigError, PowerError
from lab.local import LocalHost
from power import phase
from power.access import AccessPolicy, parse_networks
from power.client import PtdClient
from power.console_file import rotated
from power.daemon import Daemon, DaemonOptions
from power.protocol import LineSocket
from power.service import daemon_address, daemon_argv, ensure_daemon, stop_daemon

TOKEN = "s3cret-shared-token"


class Raw:
    """A bare connection from a chosen loopback source address."""

    def __init__(self, address: str, port: int, source: str) -> None:
        sock = socket.create_connection((address, port), timeout=10, source_address=(source, 0))
        self.link = LineSocket(sock)

    def ask(self, command: str) -> str | None:
        self.link.send_line(command)
        return self.link.recv_line()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_a_peer_outside_the_trusted_networks_needs_the_token(
        tmp_path: Path, token_file: Path) -> None:
    # 127.0.0.1 stands for the daemon's own machine, 127.0.0.3 for a host elsewhere in the lab
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", bind="127.0.0.2",
                            token_file=token_file, trust=("127.0.0.1/32",))
    with Daemon(options, stream=(console := _Lines())) as daemon:
        stranger = Raw("127.0.0.2", daemon.port, "127.0.0.3")
        assert stranger.ask("Hello") == ("Error: authentication required: send Auth,<token> "
                                         "first")
        assert stranger.link.recv_line() is None  # and shown the door

        guesser = Raw("127.0.0.2", daemon.port, "127.0.0.3")
        assert guesser.ask("Auth,guess") == "Error: authentication failed: wrong token"
        assert guesser.link.recv_line() is None

        member = Raw("127.0.0.2", daemon.port, "127.0.0.3")
        assert member.ask(f"Auth,{TOKEN}") == "Auth OK"
        assert member.ask("Hello") == "Hello, PTDaemon here!"
        assert member.ask("Go,1000,0,remote") is not None
        assert member.ask("Stop") == "Stopping untimed measurement"

        local = Raw("127.0.0.2", daemon.port, "127.0.0.1")  # power-dev's server: no token
        assert local.ask("Hello") == "Hello, PTDaemon here!"
        for raw in (member, local):
            raw.link.close()
    assert TOKEN not in console.text and "Auth,<token>" in console.text


def test_our_client_sends_the_token_first(tmp_path: Path, token_file: Path) -> None:
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", token_file=token_file,
                            trust=("192.0.2.0/24",))  # no loopback peer is trusted here
    with Daemon(options, stream=_Lines()) as daemon:
        with pytest.raises(PowerError, match="answered Hello with 'Error: authentication "
                                             "required"):
            PtdClient("127.0.0.1", daemon.port).connect()
        with pytest.raises(PowerError, match=r"refused subrun's token.*`token_env:`"):
            PtdClient("127.0.0.1", daemon.port, token="wrong").connect()
        client = PtdClient("127.0.0.1", daemon.port, token=TOKEN)
        assert client.connect().is_subrun
        assert client.messages[0] == ("Auth,<token>", "Auth OK")  # never the token itself
        client.close()


def test_a_long_settle_before_go_is_not_taken_for_idling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", idle_timeout_s=0.8)
    monkeypatch.setattr(phase, "KEEPALIVE_S", 0.3)
    with Daemon(options, stream=_Lines()) as daemon:
        client = PtdClient("127.0.0.1", daemon.port)
        client.connect()
        client.set_range("V", "Auto")  # holds the session, no measurement yet
        phase.settle(client, 1.5)
        client.go(1000, "after-settle")  # still connected, still holding the session
        client.stop()
        client.close()


def test_listening_beyond_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", bind="0.0.0.0")
    with pytest.raises(PowerError, match=r"will not listen on 0\.0\.0\.0 without a token"):
        Daemon(options, stream=_Lines()).start()
    assert not (tmp_path / "ptd.log").exists()  # refused before anything was opened


def test_trusted_networks_and_tokens() -> None:
    policy = AccessPolicy(TOKEN, parse_networks(["127.0.0.0/8", "::1/128"]))
    assert policy.trusts("127.0.0.9") and policy.trusts("::1")
    assert policy.trusts("::ffff:127.0.0.1")  # an IPv4 peer on a dual-stack socket
    assert not policy.trusts("10.0.0.7") and not policy.trusts("not-an-address")
    assert policy.authenticate(TOKEN) is None and policy.authenticate("x") == "wrong token"
    assert AccessPolicy(None).authenticate(TOKEN) is not None  # no token: trusted peers only


def test_the_console_stays_under_its_cap(tmp_path: Path) -> None:
    cap = 16 * 1024
    path = tmp_path / "console.log"
    options = DaemonOptions(tmp_path / "ptd.log", 0, 49, "sim", console_log=path,
                            console_max_bytes=cap)
    with Daemon(options) as daemon:
        raw = Raw("127.0.0.1", daemon.port, "127.0.0.1")
        for i in range(400):  # long lines were echoed whole: ~61 KB a command
            assert raw.ask(f"Bogus{i}," + "x" * 60_000) == "Unknown command"
        raw.ask("Watts")
        raw.link.close()
    for part in (path, rotated(path)):
        assert part.stat().st_size <= cap, part
    text = path.read_text()
    assert text.startswith("(console continued: earlier lines are in console.log.1")
    assert "Command received from client: Watts" in text  # the newest lines are kept
    assert "Bogus399,xxx" in text and "... (60009 characters)" in text  # shown cut


def test_hosts_yaml_refuses_a_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  - {name: a, transport: local}\n"
                    "analyzers:\n  - name: lab-wt\n    host: a\n    listen: 0.0.0.0\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    message = str(caught.value)
    assert "analyzers[0].listen" in message and "analyzer 'lab-wt'" in message
    assert "`token_env:`" in message and "`token_file:`" in message
    (tmp_path / "wt.token").write_text(TOKEN + "\n")
    path.write_text(path.read_text() + "    token_file: wt.token\n")
    analyzer = load_inventory(path).analyzers[0]
    assert analyzer.token_file == tmp_path / "wt.token" and analyzer.token() == TOKEN


def test_a_token_from_the_environment_must_be_set() -> None:
    variable = f"SUBRUN_TEST_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    analyzer = AnalyzerConfig(name="wt", listen="0.0.0.0", token_env=variable)
    with pytest.raises(ConfigError, match=f"export {variable}="):
        analyzer.token()
    os.environ[variable] = TOKEN
    try:
        assert analyzer.token() == TOKEN
    finally:
        del os.environ[variable]
    with pytest.raises(ValueError, match="sets both"):
        AnalyzerConfig(name="wt", token_env=variable, token_file=Path(__file__))


def test_where_the_daemon_listens_and_is_reached() -> None:
    remote = HostConfig(name="rack7", address="10.0.0.7")
    loopback = AnalyzerConfig(name="wt", host="rack7")
    with pytest.raises(PowerError, match=r"listens on 127.0.0.1 .*only that host can reach"):
        daemon_address(loopback, remote)
    everywhere = AnalyzerConfig(name="wt", host="rack7", listen="0.0.0.0", token_env="T")
    assert daemon_address(everywhere, remote) == "10.0.0.7"
    argv = daemon_argv(everywhere, python="python3", log_path="/w/power/wt/samples.log",
                       token_file="/w/power/wt/token")
    assert argv[argv.index("--bind") + 1] == "0.0.0.0"
    assert argv[argv.index("--token-file") + 1] == "/w/power/wt/token"
    assert argv[argv.index("--console-log") + 1] == "/w/power/wt/console.log"
    local = HostConfig(name="local", transport="local")
    assert daemon_address(AnalyzerConfig(name="wt"), local) == "127.0.0.1"


def test_the_service_hands_the_token_over_in_a_private_file(tmp_path: Path) -> None:
    variable = f"SUBRUN_TEST_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    token = secrets.token_hex(16)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    analyzer = AnalyzerConfig(name=f"sim-{uuid.uuid4().hex[:8]}", port=port, token_env=variable)
    host = LocalHost("local", str(tmp_path / "work"))
    os.environ[variable] = token
    endpoint = None
    try:
        endpoint = ensure_daemon(host, analyzer, address="127.0.0.1")
        token_path = tmp_path / "work" / "power" / analyzer.name / "token"
        assert token_path.read_text().strip() == token
        assert token_path.stat().st_mode & 0o077 == 0  # only its owner reads it
        commands = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True,
                                  text=True, check=True).stdout
        assert f"--token-file {token_path}" in commands and token not in commands
        assert endpoint.token == token and endpoint.identity.is_subrun
    finally:
        del os.environ[variable]
        if endpoint is not None:
            stop_daemon(host, endpoint.handle)


class _Lines:
    """A console stream that keeps what was written."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass
