"""known_hosts: read as OpenSSH reads it (markers, patterns, hashes, malformed lines), appended
to under a lock and never rewritten; checked on the lab's real sshd h2 and h3."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab.config import HostConfig, Inventory
from lab.errors import ConnectError
from lab.known_hosts import KnownHosts, append_key, host_entry, matches
from lab.ssh import SshHost

ED_BLOB = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + b"k" * 32)
ED = ED_BLOB.decode()
# What a person's own file holds: comments, a multi-host line, an OpenSSH-only key type,
# markers, broken lines, and no newline at the end.
EXISTING = (f"# my machines\n"
            f"alpha,beta,10.0.0.1 ssh-ed25519 {ED} me@laptop\n"
            f"\n"
            f"gamma sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t\n"
            f"@cert-authority *.corp.example ssh-ed25519 {ED}\n"
            f"delta ssh-rsa this-is-not-base64\n"
            f"@bogus epsilon ssh-ed25519 {ED}\n"
            f"zeta only-two")


def test_lines_are_classified_and_malformed_ones_named_with_their_line(tmp_path: Path) -> None:
    known = KnownHosts.parse(tmp_path / "kh", EXISTING)
    assert [k.line for k in known.keys] == [2, 4, 5]
    assert [m.line for m in known.malformed] == [6, 7, 8]
    assert "unknown marker '@bogus'" in known.malformed[1].reason
    assert [k.line for k in known.host_keys("beta")] == [2]
    assert known.host_keys("x.corp.example") == []  # a CA line is no host key
    notes = known.notes("x.corp.example")
    assert f"{tmp_path / 'kh'}:5 trusts a certificate authority" in notes
    assert f"{tmp_path / 'kh'}:6: the key is not valid base64" in notes


def test_patterns_match_as_in_openssh() -> None:
    assert matches("*.example.com,!bad.example.com", "good.example.com")
    assert not matches("*.example.com,!bad.example.com", "bad.example.com")
    assert matches("host?", "HOST1") and not matches("host?", "host12")
    assert matches("[127.0.0.2]:2222", host_entry("127.0.0.2", 2222))
    assert not matches("127.0.0.2", host_entry("127.0.0.2", 2222))
    salt = b"0123456789abcdefghij"
    digest = hmac.new(salt, b"[10.1.1.1]:2022", hashlib.sha1).digest()
    hashed = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    assert matches(hashed, "[10.1.1.1]:2022") and not matches(hashed, "10.1.1.1")


def test_revoked_key_is_never_a_host_key(tmp_path: Path) -> None:
    known = KnownHosts.parse(tmp_path / "kh", f"h ssh-ed25519 {ED}\n@revoked * ssh-ed25519 {ED}\n")
    assert known.host_keys("h") == []
    revoked = known.revoked("ssh-ed25519", ED)
    assert revoked is not None and revoked.line == 2


def test_append_keeps_every_byte_and_records_a_key_once(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(EXISTING)
    assert append_key(path, "[new]:22", "ssh-ed25519", ED) is None
    assert append_key(path, "[new]:22", "ssh-ed25519", ED) is None  # already there: no new line
    text = path.read_text()
    assert text == EXISTING + f"\n[new]:22 ssh-ed25519 {ED}\n"
    other = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + b"o" * 32)
    conflict = append_key(path, "[new]:22", "ssh-ed25519", other.decode())
    assert conflict is not None and conflict.line == 9
    assert path.read_text() == text


# --- on the lab's real sshd -----------------------------------------------------------------


def _host(config: HostConfig, tmp_path: Path, known: Path, **update: object) -> SshHost:
    return SshHost(config.model_copy(update={"work_dir": str(tmp_path / "work"),
                                             "known_hosts": known, **update}))


def _lab_key(lab_dir: Path, name: str) -> tuple[str, str]:
    key_type, blob = (lab_dir / "ssh" / name / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    return key_type, blob


@pytest.mark.lab
def test_parallel_first_contacts_keep_every_key_and_every_line(
        lab_inventory: Inventory, lab_dir: Path, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(EXISTING)
    configs = [lab_inventory.host(n) for n in ("h2", "h3")]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def first_contact(config: HostConfig) -> None:
        host = _host(config, tmp_path, known, trust_on_first_use=True)
        try:
            barrier.wait(timeout=30)
            host.run(["true"])
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            host.close()

    threads = [threading.Thread(target=first_contact, args=(configs[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    text = known.read_text()
    assert text.startswith(EXISTING + "\n")  # every byte of the person's file kept
    added = text[len(EXISTING) + 1:].splitlines()
    expected = {f"[127.0.0.{i}]:2222 {' '.join(_lab_key(lab_dir, f'h{i}'))}" for i in (2, 3)}
    assert sorted(added) == sorted(expected)  # each key recorded, and once


@pytest.mark.lab
def test_revoked_key_is_refused_even_when_recorded(ssh_config: HostConfig, lab_dir: Path,
                                                   tmp_path: Path) -> None:
    key_type, blob = _lab_key(lab_dir, "h2")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.2]:2222 {key_type} {blob}\n@revoked * {key_type} {blob}\n")
    with pytest.raises(ConnectError) as caught:
        _host(ssh_config, tmp_path, known, trust_on_first_use=True).run(["true"])
    assert f"is revoked by {known}:2" in str(caught.value)
    assert known.read_text().count("\n") == 2  # trust-on-first-use recorded nothing


@pytest.mark.lab
def test_markers_and_malformed_lines_do_not_stop_a_recorded_host(
        ssh_config: HostConfig, lab_dir: Path, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(EXISTING + "\n[127.0.0.2]:2222 " + " ".join(_lab_key(lab_dir, "h2")) + "\n")
    host = _host(ssh_config, tmp_path, known)
    assert host.run(["echo", "ok"]).stdout == "ok\n"
    host.close()


@pytest.mark.lab
def test_hosts_check_names_malformed_lines_and_exits_3(ssh_config: HostConfig,
                                                       tmp_path: Path) -> None:
    from flows.cli import app

    known = tmp_path / "known_hosts"
    known.write_text("@cert-authority [127.0.0.2]:2222 ssh-ed25519 " + ED + "\nbroken line\n"
                     "[127.0.0.2]:2222 sk-ssh-ed25519@openssh.com "
                     "AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t\n")
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(f"hosts:\n  - {{name: h2, address: 127.0.0.2, port: 2222, user: root, "
                         f"key: {ssh_config.key}, known_hosts: {known}}}\n")
    result = CliRunner().invoke(app, ["hosts", "check", str(inventory)])
    assert result.exit_code == 3, result.output
    flat = " ".join(result.output.split())
    assert "is not in" in flat and f"{known}:1 trusts a certificate authority" in flat
    assert f"{known}:2: expected host names" in flat
    assert f"{known}:3 records a sk-ssh-ed25519@openssh.com key, a type subrun" in flat


@pytest.mark.lab
def test_a_known_hosts_that_cannot_be_read_is_one_clear_error_at_once(
        ssh_config: HostConfig, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.mkdir()  # not a file
    with pytest.raises(ConnectError, match=f"{known}: the known_hosts file cannot be read"):
        _host(ssh_config, tmp_path, known, trust_on_first_use=True).run(["true"])


def test_a_known_hosts_pointed_at_an_endless_file_is_refused(tmp_path: Path) -> None:
    endless = tmp_path / "known_hosts"
    endless.symlink_to("/dev/zero")
    with pytest.raises(ConnectError, match="larger than"):
        KnownHosts.read(endless)


def test_a_key_that_cannot_be_recorded_is_a_final_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab import known_hosts, ssh

    path = tmp_path / "known_hosts"
    key = ssh._pkey(known_hosts.KnownKey("h", "ssh-ed25519", ED, 1))
    assert key is not None

    def read_only(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(known_hosts.os, "open", read_only)
    policy = ssh._FirstContact(KnownHosts(path), trust_on_first_use=True)
    with pytest.raises(ConnectError, match=f"Cannot record the host key of h in {path}"):
        policy.missing_host_key(None, "h", key)  # type: ignore[arg-type]
