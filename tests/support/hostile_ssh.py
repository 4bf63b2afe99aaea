"""A hostile SSH target on loopback, built on paramiko's server side.

It answers the collection's listing with whatever bytes a test crafts, serves *any* path over
SFTP (a path it was not told about reads as `pwned`, so a collector that follows a hostile name
really writes the file), and answers the detached-process protocol just enough for a native
run to start, end with status 0 and be cleaned up. It records every command it was sent.
"""

from __future__ import annotations

import io
import socket
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.common import (
    AUTH_SUCCESSFUL,
    OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    OPEN_SUCCEEDED,
)

from lab.config import HostConfig

UNKNOWN_CONTENT = b"pwned\n"


@dataclass
class Script:
    """What the hostile target says: its listing, its files, its symlinks."""

    listing: bytes = b"subrun:not-regular\0"
    files: dict[str, bytes] = field(default_factory=dict)
    symlinks: set[str] = field(default_factory=set)  # lstat says symlink, whatever was listed
    commands: list[str] = field(default_factory=list)

    def listings(self) -> int:
        """How many times the collector asked for the listing."""
        return sum("subrun:not-regular" in c for c in self.commands)

    def reply(self, command: str) -> bytes:
        if "subrun:not-regular" in command:
            return self.listing
        if "pid.tmp" in command:  # starting a detached process: report its pid
            return b"4242\n"
        if "kill -0" in command:  # a detached process's status: it has ended, status 0
            return b"exit 0\n"
        return b""


class _Server(paramiko.ServerInterface):
    def __init__(self, script: Script) -> None:
        self.script = script

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return OPEN_SUCCEEDED
        return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        text = command.decode("utf-8", errors="replace")
        self.script.commands.append(text)
        threading.Thread(target=_answer, args=(channel, self.script.reply(text)),
                         daemon=True).start()
        return True


def _answer(channel: paramiko.Channel, reply: bytes) -> None:
    """Read the command's stdin to its end (so replies follow the exec's acceptance), reply."""
    try:
        while channel.recv(65536):
            pass
        channel.sendall(reply)
        channel.send_exit_status(0)
    finally:
        channel.close()


class _Sftp(paramiko.SFTPServerInterface):
    def __init__(self, server: _Server, *args: object, **kwargs: object) -> None:
        super().__init__(server)
        self.script = server.script

    def _attrs(self, path: str) -> paramiko.SFTPAttributes:
        attrs = paramiko.SFTPAttributes()
        if path in self.script.symlinks:
            attrs.st_mode, attrs.st_size = stat.S_IFLNK | 0o777, 4
        else:
            attrs.st_mode = stat.S_IFREG | 0o644
            attrs.st_size = len(self.script.files.get(path, UNKNOWN_CONTENT))
        return attrs

    def stat(self, path: str) -> paramiko.SFTPAttributes:
        return self._attrs(path)

    def lstat(self, path: str) -> paramiko.SFTPAttributes:
        return self._attrs(path)

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> paramiko.SFTPHandle:
        handle = paramiko.SFTPHandle(flags)
        handle.readfile = io.BytesIO(self.script.files.get(path, UNKNOWN_CONTENT))  # type: ignore[attr-defined]
        return handle


class HostileTarget:
    """A loopback SSH server speaking Script; `config(...)` is a hosts.yaml entry for it."""

    def __init__(self, script: Script, host_key: paramiko.PKey) -> None:
        self.script = script
        self.host_key = host_key
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.transports: list[paramiko.Transport] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return  # closed
            transport = paramiko.Transport(sock)
            transport.add_server_key(self.host_key)
            transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _Sftp)
            self.transports.append(transport)
            transport.start_server(server=_Server(self.script))

    def config(self, tmp_path: Path, key: Path, **update: object) -> HostConfig:
        """A host entry, logging in with key, that trusts exactly this server's host key."""
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{self.port} ssh-rsa {self.host_key.get_base64()}\n")
        entry = {"name": "hostile", "transport": "ssh", "address": "127.0.0.1",
                 "port": self.port, "user": "subrun", "key": key, "known_hosts": known,
                 "work_dir": "/srv/subrun", "docker": {"engine": False}, **update}
        return HostConfig.model_validate(entry)

    def close(self) -> None:
        self.listener.close()
        for transport in self.transports:
            transport.close()
