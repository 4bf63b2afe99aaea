"""Targets reached over SSH (paramiko lives here and nowhere else).

Host keys are always verified against a known_hosts file (read, and appended to, by
lab.known_hosts); an unknown key is accepted only when the host entry opts in to
trust-on-first-use. A command cut off by a drop is reported (ConnectionLost), never silently run
again. A link that stops answering (a silent partition) is declared dead by a watchdog within
about 15 s instead of hanging each command to its timeout.

A host never reached fails fast: that is a wrong address or a machine that is off. Once reached,
a dropped link is re-established with backoff; one call keeps trying for a reconnection window
(LinkDown after it, for the caller to retry later), and the whole outage, however many calls it
cuts, may last the host's `outage_budget_s`. Then the host is given up (HostUnreachable) and
every later call fails at once.
"""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import paramiko

from lab import liveness
from lab.config import HostConfig
from lab.errors import (
    AccessRefused,
    CommandFailed,
    CommandTimedOut,
    ConfigError,
    ConnectError,
    ConnectionLost,
    HostUnreachable,
    LinkDown,
    TransferFailed,
)
from lab.host import DEFAULT_TIMEOUT_S, CommandResult, Host, OutputSink, Stdin
from lab.known_hosts import KnownHosts, KnownKey, append_key, host_entry
from lab.liveness import Outage, Watchdog
from lab.names import host_name
from lab.output import CHUNK_BYTES, OutputTail

RECONNECT_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # first contact: a host never reached fails fast
BACKOFF_MAX_S = 8.0  # between reconnection attempts to a host reached before
RECONNECT_WINDOW_S = 30.0  # one call's reconnection attempts (at most a third of the budget)
CONNECT_TIMEOUT_S = 10.0
USER_SSH_CONFIG = Path("~/.ssh/config").expanduser()


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to connect, after an ssh-config alias (if any) is resolved."""

    address: str
    port: int
    user: str | None
    key: Path | None
    known_hosts: Path


def resolve_target(config: HostConfig) -> SshTarget:
    """Merge the host entry with ~/.ssh/config when it names an alias; entry values win."""
    found: dict[str, Any] = {}
    if config.ssh_alias:  # checked again: a model_copy(update=...) skips validation
        try:
            host_name(config.ssh_alias)
        except ValueError as e:
            raise ConfigError(f"Host '{config.name}': ssh_alias {e}.") from e
    if config.ssh_alias and USER_SSH_CONFIG.exists():
        found = dict(paramiko.SSHConfig.from_path(str(USER_SSH_CONFIG)).lookup(config.ssh_alias))
    identity = found.get("identityfile", [None])[0]
    known = found.get("userknownhostsfile", "~/.ssh/known_hosts").split()[0]
    return SshTarget(
        address=config.address or found.get("hostname") or config.ssh_alias or "",
        port=config.port if config.port != 22 or "port" not in found else int(found["port"]),
        user=config.user or found.get("user"),
        key=config.key or (Path(identity).expanduser() if identity else None),
        known_hosts=config.known_hosts or Path(known).expanduser(),
    )


class SshHost(Host):
    """A target reached over SSH, with one persistent connection re-opened when it drops."""

    def __init__(self, config: HostConfig) -> None:
        super().__init__(config.name, config.work_dir, int(config.limits.output_max_bytes))
        self.config = config
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self._watchdog: Watchdog | None = None
        self._silent = False  # the watchdog closed the last link: it had stopped answering
        self._reached = False  # connected once: later drops are outages, not wrong addresses
        self.outage = Outage(config.outage_budget_s)

    # --- connection ---------------------------------------------------------------------

    def connect(self) -> paramiko.Transport:
        """The live transport, connecting (with backoff for transient faults) when needed."""
        with self._lock:
            if self.outage.spent():
                raise self._unreachable(None)
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    # no recovery yet: a transport that has not noticed its reset looks active,
                    # and only a channel opened on it shows the link works (`run`, `_sftp`)
                    return transport
                self._forget_client()
                self.outage.fault()
            if self.outage.spent():
                raise self._unreachable(None)
            return self._reconnect() if self._reached else self._first_contact()

    def _first_contact(self) -> paramiko.Transport:
        last: Exception | None = None
        for delay in (0.0, *RECONNECT_DELAYS_S):
            time.sleep(delay)
            try:
                return self._connected()
            except (OSError, EOFError, paramiko.SSHException) as e:
                if _is_final(e):
                    raise self._translate(e) from e
                last = e
        assert last is not None
        raise self._translate(last) from last

    def _reconnect(self) -> paramiko.Transport:
        """Reconnect a link that was up, with backoff, within one window and the budget."""
        window_s = min(RECONNECT_WINDOW_S, self.outage.budget_s / 3)
        ends = time.monotonic() + window_s
        delay, last = 0.0, None
        while True:
            time.sleep(min(delay, self.outage.remaining_s, max(0.0, ends - time.monotonic())))
            try:
                return self._connected()
            except (OSError, EOFError, paramiko.SSHException) as e:
                if _is_final(e):
                    raise self._translate(e) from e
                last = e
                self.outage.fault()  # also after close(): a failed reconnection is an outage
            if self.outage.spent():
                raise self._unreachable(last) from last
            if time.monotonic() >= ends:
                raise LinkDown(
                    f"The link to host '{self.name}' dropped {self.outage.elapsed_s:.0f} s ago "
                    f"and did not come back within {window_s:.0f} s ({last or 'no answer'}). "
                    "subrun tries again later, for as long as the host's outage budget allows "
                    f"({self.outage.budget_s:g} s: `outage_budget_s` in hosts.yaml)."
                ) from last
            delay = min(BACKOFF_MAX_S, max(0.5, delay * 2))

    def _connected(self) -> paramiko.Transport:
        """Open a connection, start its watchdog, and end any outage."""
        self._client = self._open()
        transport = self._client.get_transport()
        assert transport is not None
        transport.set_keepalive(15)
        self._silent = False
        self._watchdog = Watchdog(
            lambda: transport.global_request("keepalive@openssh.com", wait=True),
            transport.is_active, lambda: self._declare_dead(transport), name=self.name,
            interval_s=liveness.PROBE_INTERVAL_S, deadline_s=liveness.ANSWER_DEADLINE_S).start()
        self._reached = True
        self.outage.recovered()
        return transport

    def _declare_dead(self, transport: paramiko.Transport) -> None:
        """The link stopped answering: close it, so every call waiting on it fails now."""
        self._silent = True
        self.outage.fault()
        transport.close()

    def _forget_client(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _unreachable(self, last: Exception | None) -> HostUnreachable:
        t = resolve_target(self.config)
        why = f" (last error: {last})" if last else ""
        return HostUnreachable(
            f"Host '{self.name}' ({t.address}:{t.port}) has been unreachable for "
            f"{self.outage.elapsed_s:.0f} s, its whole outage budget (`outage_budget_s: "
            f"{self.outage.budget_s:g}` in hosts.yaml){why}, so subrun gives it up for this "
            "campaign: its remaining runs are not run, and an attempt in flight stays recorded "
            "running, to be reattached when the campaign is started again. The other hosts "
            "carry on. Check the machine and its network, or raise outage_budget_s for a link "
            "known to drop for longer."
        )

    def close(self) -> None:
        with self._lock:
            self._forget_client()

    def ensure_reachable(self) -> None:
        if self.outage.spent():
            raise self._unreachable(None)

    def _open(self) -> paramiko.SSHClient:
        target = resolve_target(self.config)
        known = KnownHosts.read(target.known_hosts)
        name = host_entry(target.address, target.port)
        client = paramiko.SSHClient()
        for entry in known.host_keys(name):
            if (key := _pkey(entry)) is not None:
                client.get_host_keys().add(name, key.get_name(), key)
        client.set_missing_host_key_policy(
            _FirstContact(known, self.config.trust_on_first_use))
        try:
            client.connect(
                target.address,
                port=target.port,
                sock=_socket(target),
                username=target.user,
                key_filename=str(target.key) if target.key else None,
                look_for_keys=target.key is None,
                allow_agent=target.key is None,
                timeout=CONNECT_TIMEOUT_S,
                banner_timeout=CONNECT_TIMEOUT_S,
                auth_timeout=CONNECT_TIMEOUT_S,
            )
        except BaseException:
            client.close()
            raise
        return client

    def _translate(self, e: Exception) -> ConnectError:
        t = resolve_target(self.config)
        where = f"host '{self.name}' ({t.user or 'default user'}@{t.address}:{t.port})"
        hosts_entry = host_entry(t.address, t.port)
        if isinstance(e, _RevokedKey | paramiko.BadHostKeyException) and (
                revoked := KnownHosts.read(t.known_hosts).revoked(e.key.get_name(),
                                                                  e.key.get_base64())):
            return AccessRefused(
                f"The host key of {where} ({e.key.get_name()} {e.key.fingerprint}) is revoked "
                f"by {t.known_hosts}:{revoked.line}, so subrun refuses to connect. Ask the "
                "machine's owner for its new key; if the revocation is a mistake, remove that "
                "line."
            )
        if isinstance(e, paramiko.BadHostKeyException):
            return AccessRefused(
                f"The host key of {where} has CHANGED: it offered {e.key.get_name()} "
                f"{e.key.fingerprint}, but {t.known_hosts} records {e.expected_key.fingerprint}. "
                "This is what a reinstalled machine or an interception looks like, so subrun "
                "refuses to connect. If the change is expected, remove the old entry with "
                f"`ssh-keygen -R '{hosts_entry}' -f {t.known_hosts}` and connect once to record "
                "the new one."
            )
        if isinstance(e, paramiko.SSHException) and "not found in known_hosts" in str(e):
            known = KnownHosts.read(t.known_hosts)
            unusable = [f"{t.known_hosts}:{k.line} records a {k.key_type} key, a type subrun "
                        "(paramiko) cannot verify." for k in known.host_keys(hosts_entry)
                        if _pkey(k) is None]
            notes = " ".join([*unusable, known.notes(hosts_entry)]).strip()
            return AccessRefused(
                f"The host key of {where} is not in {t.known_hosts}, so subrun cannot verify it "
                "and refuses to connect. Check the key's fingerprint with the machine's owner, "
                f"then add it with `ssh-keyscan -p {t.port} {t.address} >> {t.known_hosts}`, or "
                f"set `trust_on_first_use: true` for host '{self.name}' in hosts.yaml to accept "
                "and record it on first contact." + (f" {notes}" if notes else "")
            )
        if isinstance(e, paramiko.AuthenticationException):
            key = f"the key {t.key}" if t.key else "the agent's and default keys"
            return AccessRefused(
                f"{where} rejected {key} for user '{t.user}'. Check the `key:` and `user:` of "
                f"host '{self.name}' in hosts.yaml and that the public key is in the target's "
                "~/.ssh/authorized_keys."
            )
        return (AccessRefused if isinstance(e, socket.gaierror) else ConnectError)(
            f"Cannot reach {where}: {e or type(e).__name__}. Check that the machine is up, that "
            f"sshd listens on port {t.port}, and the `address:`/`port:` in hosts.yaml; run "
            "`subrun hosts check` to test every host."
        )

    # --- the contract -------------------------------------------------------------------

    def run(
        self,
        argv: list[str] | tuple[str, ...],
        *,
        check: bool = True,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: Stdin = None,
        on_output: OutputSink | None = None,
    ) -> CommandResult:
        argv = tuple(argv)
        transport = self.connect()
        started = time.monotonic()
        try:
            chan = transport.open_session(timeout=CONNECT_TIMEOUT_S)
            chan.exec_command(_command_line(argv, env, cwd))
        except (OSError, EOFError, paramiko.SSHException) as e:
            self.outage.fault()
            raise self._lost(argv, "before the command could start") from e
        self.outage.recovered()  # the target answered: whatever outage there was is over
        out = OutputTail(self.output_cap_bytes, on_output)
        err = OutputTail(self.output_cap_bytes, on_output)
        try:  # the link may die at any step here: every paramiko fault is a lost command
            feeder = _start_feeder(chan, stdin)
            timed_out = _collect(chan, transport, started, timeout_s, (out, err))
            if feeder is not None:
                feeder.join(timeout=5)
            status = -1 if timed_out or not chan.exit_status_ready() else chan.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as e:
            self.outage.fault()
            raise self._lost(argv, "while it was running") from e
        finally:
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                chan.close()
        duration = time.monotonic() - started
        if timed_out:
            result = _result(self.name, argv, -1, (out, err), duration)
            raise CommandTimedOut(result, f"On host '{self.name}', `{result.command}` did not "
                                  f"finish within {timeout_s:g} s; subrun closed its channel.")
        if status == -1 or not transport.is_active():
            self.outage.fault()
            raise self._lost(argv, f"after {duration:.1f} s, while it was running")
        result = _result(self.name, argv, status, (out, err), duration)
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def put(self, local_path: Path, remote_path: str) -> None:
        self.makedirs(str(PurePosixPath(remote_path).parent))
        try:
            with self._sftp() as sftp:
                sftp.put(str(local_path), remote_path)
        except (FileNotFoundError, PermissionError) as e:
            raise TransferFailed(f"Copying {local_path} to {self.name}:{remote_path} failed: "
                                 f"{e.strerror or e}.") from e
        except (OSError, EOFError, paramiko.SSHException) as e:
            self.outage.fault()
            raise self._lost(("put", str(local_path), remote_path), "while copying a file") from e

    def get(self, remote_path: str, local_path: Path, *, max_bytes: int | None = None) -> int:
        where = f"{self.name}:{remote_path}"
        try:
            with self._sftp() as sftp:
                attrs = sftp.lstat(remote_path)
                if not stat.S_ISREG(attrs.st_mode or 0):
                    raise TransferFailed(f"{where} is not a regular file (a symlink, a "
                                         "directory or a device), so it is not copied.")
                if max_bytes is not None and (attrs.st_size or 0) > max_bytes:
                    raise TransferFailed(f"{where} holds {attrs.st_size} bytes, more than the "
                                         f"{max_bytes} allowed; it was not copied.")
                with sftp.open(remote_path, "rb") as remote:
                    return _stream_to(remote, attrs.st_size or 0, Path(local_path),
                                      max_bytes, where)
        except (FileNotFoundError, PermissionError) as e:
            raise TransferFailed(f"{where} cannot be copied: {e.strerror or e}.") from e
        except (OSError, EOFError, paramiko.SSHException) as e:
            self.outage.fault()
            raise self._lost(("get", remote_path, str(local_path)), "while copying a file") from e

    def _sftp(self) -> paramiko.SFTPClient:
        sftp = paramiko.SFTPClient.from_transport(self.connect())
        assert sftp is not None
        self.outage.recovered()  # the target answered: whatever outage there was is over
        return sftp

    def _lost(self, argv: tuple[str, ...], when: str) -> ConnectionLost:
        import shlex

        silent = (f" (it had stopped answering for {liveness.ANSWER_DEADLINE_S:g} s)"
                  if self._silent else "")
        return ConnectionLost(
            f"The connection to host '{self.name}' dropped{silent} {when}: "
            f"`{shlex.join(argv)}`. It may "
            "or may not have completed on the target, so subrun does not run it again; the next "
            "command reconnects.",
            host=self.name,
            argv=argv,
        )


def _socket(target: SshTarget) -> socket.socket:
    """A TCP connection to the target with Nagle's algorithm off. SSH sends small packets
    that wait for an answer (a channel open, a command, an SFTP request); with Nagle on, each
    may wait for the peer's delayed acknowledgement, about 40 ms on Linux, so every command
    cost 45 ms on a link whose round trip is a fraction of a millisecond."""
    sock = socket.create_connection((target.address, target.port), timeout=CONNECT_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _command_line(argv: tuple[str, ...], env: Mapping[str, str] | None, cwd: str | None) -> str:
    import shlex

    parts = list(argv)
    if env:
        parts = ["env", *(f"{k}={v}" for k, v in env.items()), *parts]
    line = shlex.join(parts)
    return f"cd {shlex.quote(cwd)} && exec {line}" if cwd else line


def _start_feeder(chan: paramiko.Channel, stdin: Stdin) -> threading.Thread | None:
    if stdin is None:
        chan.shutdown_write()
        return None
    chunks = [stdin] if isinstance(stdin, bytes) else stdin

    def feed() -> None:
        try:
            for chunk in chunks:
                chan.sendall(chunk)
            chan.shutdown_write()
        except (OSError, EOFError):
            pass  # the link dropped or the command stopped reading; the caller reports it

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


def _collect(
    chan: paramiko.Channel,
    transport: paramiko.Transport,
    started: float,
    timeout_s: float | None,
    streams: tuple[OutputTail, OutputTail],
) -> bool:
    """Read stdout and stderr into their bounded tails until the command ends; True on
    timeout."""
    out, err = streams
    exited_at: float | None = None  # when the exit status was seen with nothing left to read
    while True:
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            return True
        select.select([chan], [], [], 0.2)
        while chan.recv_ready():
            out.feed(chan.recv(CHUNK_BYTES))
            exited_at = None
        while chan.recv_stderr_ready():
            err.feed(chan.recv_stderr(CHUNK_BYTES))
            exited_at = None
        if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
            # sshd may send the exit status before the last output: read on to the end of
            # the stream, unless a process left behind keeps it open past a short grace
            if chan.eof_received or chan.closed:
                return False
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > EOF_GRACE_S:
                return False
        if not transport.is_active():
            return False


def _result(host: str, argv: tuple[str, ...], status: int,
            streams: tuple[OutputTail, OutputTail], duration_s: float) -> CommandResult:
    out, err = streams
    stdout, stderr = out.finish(), err.finish()
    return CommandResult(host, argv, status, stdout, stderr, duration_s,
                         out.dropped_bytes, err.dropped_bytes)


EOF_GRACE_S = 2.0  # output still awaited after a command's exit status arrived
PREFETCH_REQUESTS = 64  # SFTP reads in flight while copying a file
SFTP_READ_BYTES = 32 * 1024  # one SFTP read request
WINDOW_BYTES = 8 * 1024 * 1024  # read ahead at most this much: buffered data stays bounded


def _stream_to(remote: paramiko.SFTPFile, size: int, local: Path, max_bytes: int | None,
               where: str) -> int:
    """Copy an open remote file to local, pipelined one window at a time: a prefetch of the
    whole file keeps every answer the disk has not taken yet in memory, so a slow disk would
    let a large file fill the controller's memory."""
    local.parent.mkdir(parents=True, exist_ok=True)
    copied = 0

    def keep(data: bytes) -> None:
        nonlocal copied
        copied += len(data)
        if max_bytes is not None and copied > max_bytes:
            raise TransferFailed(f"{where} grew past the {max_bytes} bytes allowed while "
                                 "it was copied; it was not copied whole.")
        out.write(data)

    with local.open("wb") as out:
        for start in range(0, size, WINDOW_BYTES):
            end = min(start + WINDOW_BYTES, size)
            reads = [(o, min(SFTP_READ_BYTES, end - o)) for o in range(start, end, SFTP_READ_BYTES)]
            for data in remote.readv(reads, max_concurrent_prefetch_requests=PREFETCH_REQUESTS):
                keep(data)
        remote.seek(copied)  # a file that grew while it was copied: its new end too
        while chunk := remote.read(CHUNK_BYTES):
            keep(chunk)
    return copied


class _RevokedKey(paramiko.SSHException):
    """The server presented a key that known_hosts marks `@revoked`."""

    def __init__(self, key: paramiko.PKey) -> None:
        super().__init__("host key revoked in known_hosts")
        self.key = key


class _FirstContact(paramiko.MissingHostKeyPolicy):
    """A key known_hosts does not record: refused when revoked, recorded (appended, under a
    lock) with trust-on-first-use, refused otherwise."""

    def __init__(self, known: KnownHosts, trust_on_first_use: bool) -> None:
        self.known = known
        self.trust = trust_on_first_use

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        if self.known.revoked(key.get_name(), key.get_base64()):
            raise _RevokedKey(key)
        if not self.trust:
            raise paramiko.SSHException(f"Server {hostname!r} not found in known_hosts")
        try:
            other = append_key(self.known.path, hostname, key.get_name(), key.get_base64())
        except OSError as e:  # final: no retry can make the file writable
            raise AccessRefused(f"Cannot record the host key of {hostname} in "
                                f"{self.known.path} ({e.strerror}); make the file writable, "
                                "or record the key yourself with ssh-keyscan.") from e
        if other is not None and (expected := _pkey(other)) is not None:
            raise paramiko.BadHostKeyException(hostname, key, expected)


def _pkey(entry: KnownKey) -> paramiko.PKey | None:
    """The paramiko key of a known_hosts entry; None for a type paramiko cannot use."""
    try:
        return paramiko.PKey.from_type_string(entry.key_type, base64.b64decode(entry.key_b64))
    except (paramiko.SSHException, paramiko.pkey.UnknownKeyType, ValueError, TypeError):
        return None


def _is_final(e: Exception) -> bool:
    """Faults that retrying cannot fix: keys, authentication, refused host keys."""
    if isinstance(e, paramiko.BadHostKeyException | paramiko.AuthenticationException):
        return True
    if isinstance(e, paramiko.SSHException) and "known_hosts" in str(e):
        return True  # not recorded, or revoked
    return isinstance(e, socket.gaierror)
