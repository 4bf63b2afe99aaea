"""SSH-only behaviour on the lab's real sshd: drops, reattachment, host keys, bad keys."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from lab.config import HostConfig
from lab.errors import ConnectError, ConnectionLost
from lab.ssh import SshHost
from tests.conftest import lab_pid
from tests.support.sshd_sessions import serving

pytestmark = pytest.mark.lab


def fresh(config: HostConfig, tmp_path: Path, **update: object) -> SshHost:
    return SshHost(config.model_copy(update={"work_dir": str(tmp_path / "work"), **update}))


def test_detached_process_survives_the_connection(ssh_config: HostConfig, tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    host = fresh(ssh_config, tmp_path)
    host.start_detached(["sh", "-c", f"sleep 2; touch {marker}; exit 4"], name="survivor")
    host.close()
    later = fresh(ssh_config, tmp_path)
    handle = later.find_detached("survivor")
    assert handle is not None
    status = later.wait_detached(handle, timeout_s=30)
    assert status.exit_status == 4
    assert marker.exists()


def test_the_link_sends_each_packet_at_once(ssh_config: HostConfig, tmp_path: Path) -> None:
    """Nagle's algorithm is off on the connection, as after every reconnection: with it on,
    a channel open waits for sshd's delayed acknowledgement (about 40 ms) on every command."""
    host = fresh(ssh_config, tmp_path)
    for _ in range(2):
        assert host.run(["echo", "up"]).stdout == "up\n"
        link = host.connect()
        assert link.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        link.close()  # the next command reconnects


def test_command_cut_by_dropped_connection_is_reported(ssh_config: HostConfig,
                                                      tmp_path: Path) -> None:
    host = fresh(ssh_config, tmp_path)
    host.run(["true"])
    link = host.connect()
    outcome: dict[str, BaseException] = {}

    def long_command() -> None:
        try:
            host.run(["sleep", "30"])
        except BaseException as e:
            outcome["error"] = e

    worker = threading.Thread(target=long_command)
    worker.start()
    time.sleep(1.0)
    ours = serving(lab_pid("h2-sshd"), link)
    assert ours, "the connection's sshd process was not found"
    for proc in ours:
        os.kill(proc.pid, signal.SIGKILL)  # the server side of our connection dies
    worker.join(timeout=20)
    assert isinstance(outcome.get("error"), ConnectionLost)
    assert "does not run it again" in str(outcome["error"])
    assert host.run(["echo", "back"]).stdout == "back\n"  # the next call reconnects


def test_changed_host_key_is_refused(ssh_config: HostConfig, tmp_path: Path,
                                     lab_dir: Path) -> None:
    other_key = (lab_dir / "ssh" / "h3" / "ssh_host_ed25519_key.pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.2]:2222 {other_key[0]} {other_key[1]}\n")
    host = fresh(ssh_config, tmp_path, known_hosts=known)
    with pytest.raises(ConnectError) as caught:
        host.run(["true"])
    assert "CHANGED" in str(caught.value) and "ssh-keygen -R" in str(caught.value)


def test_unknown_host_key_needs_opt_in(ssh_config: HostConfig, tmp_path: Path) -> None:
    known = tmp_path / "empty_known_hosts"
    known.write_text("")
    with pytest.raises(ConnectError) as caught:
        fresh(ssh_config, tmp_path, known_hosts=known).run(["true"])
    assert "trust_on_first_use" in str(caught.value)
    tofu = fresh(ssh_config, tmp_path, known_hosts=known, trust_on_first_use=True)
    assert tofu.run(["echo", "ok"]).stdout == "ok\n"
    assert "[127.0.0.2]:2222" in known.read_text()
    strict = fresh(ssh_config, tmp_path, known_hosts=known)  # now recorded: strict works
    assert strict.run(["true"]).ok


def test_wrong_user_key_is_rejected(ssh_config: HostConfig, tmp_path: Path) -> None:
    import subprocess

    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with pytest.raises(ConnectError) as caught:
        fresh(ssh_config, tmp_path, key=key).run(["true"])
    assert "rejected" in str(caught.value) and "h2" in str(caught.value)


def test_unreachable_host(ssh_config: HostConfig, tmp_path: Path) -> None:
    host = fresh(ssh_config, tmp_path, address="127.0.0.9", port=2299)
    with pytest.raises(ConnectError) as caught:
        host.run(["true"])
    assert "Cannot reach host 'h2'" in str(caught.value)
