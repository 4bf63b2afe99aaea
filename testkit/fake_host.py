"""An in-memory Host for tests of pure logic and for fault injection: no processes, no root.

Commands are answered by handlers a test registers for an argv prefix (the longest prefix wins),
on top of a few built-in utilities that work on the fake's own files (`cat`, `test`, `mkdir -p`,
`rm`, `printf`, `echo`, `wc -c`, `df -Pk`, `sleep`, `true`, `false`). Files live in a dict.
Time is simulated: a command "takes" the seconds its reply says, and a detached process runs
until the fake's clock passes its duration (its log is its reply's output, whole from the start),
so timeouts and long runs cost no wall time. A
command nobody scripted exits 127, as an unknown program does on a real shell, and every call is
recorded in `calls`. A handler may raise (ConnectionLost, CommandTimedOut ...) to inject a fault.

FakeHost passes the parts of tests/test_host_contract.py that do not need a real kernel
(process groups, pid reuse); LocalHost and SshHost pass all of it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from lab import supervisor
from lab.errors import CommandFailed, CommandTimedOut, RunError, TransferFailed
from lab.host import (
    DEFAULT_TIMEOUT_S,
    CommandResult,
    Detached,
    DetachedStatus,
    Host,
    OutputSink,
    Stdin,
)
from lab.output import DEFAULT_OUTPUT_CAP_BYTES, OutputTail

SIGNAL_EXIT = {"TERM": 143, "INT": 130, "HUP": 129, "KILL": 137}


@dataclass(frozen=True)
class Call:
    """One command as the fake received it."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    stdin: bytes = b""


@dataclass(frozen=True)
class Reply:
    """How a scripted command answers: its output, exit status and how long it takes."""

    stdout: str = ""
    stderr: str = ""
    exit_status: int = 0
    duration_s: float = 0.0


Handler = Callable[[Call], Reply]


@dataclass
class _Process:
    handle: Detached
    reply: Reply
    started_s: float
    ended: int | None = None  # exit status once signalled or finished early
    lost: bool = False


class FakeHost(Host):
    """A scriptable in-memory Host: `on(prefix, reply)` answers commands, `files` is its disk."""

    def __init__(self, name: str = "fake", work_dir: str = "/srv/subrun",
                 output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES) -> None:
        super().__init__(name, work_dir, output_cap_bytes)
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/"}
        self.calls: list[Call] = []
        self.clock_s = 0.0
        self.free_bytes_value = 100 * 1024**3
        self.closed = False
        self._handlers: dict[tuple[str, ...], Handler] = {}
        self._processes: dict[str, _Process] = {}
        self._next_pid = 1000
        self._handlers.update(_builtins(self))

    # --- scripting --------------------------------------------------------------------------

    def on(self, prefix: Iterable[str], reply: Reply | Handler) -> None:
        """Answer every command starting with prefix by reply (or by calling it)."""
        self._handlers[tuple(prefix)] = reply if callable(reply) else (lambda call: reply)

    def commands(self) -> list[tuple[str, ...]]:
        """The argv of every command run so far, in order."""
        return [c.argv for c in self.calls]

    def advance(self, seconds: float) -> None:
        """Let simulated time pass (detached processes whose time is up have ended)."""
        self.clock_s += seconds

    def lose(self, name: str) -> None:
        """The detached process vanishes without an exit status (SIGKILL, a reboot)."""
        self._processes[name].lost = True

    # --- the transport ----------------------------------------------------------------------

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
        call = Call(tuple(argv), dict(env or {}), cwd, _read_stdin(stdin))
        self.calls.append(call)
        reply = self._handler(call.argv)(call)
        timed_out = timeout_s is not None and reply.duration_s > timeout_s
        self.clock_s += min(reply.duration_s, timeout_s) if timeout_s is not None else (
            reply.duration_s)
        stdout = OutputTail(self.output_cap_bytes, on_output)
        stderr = OutputTail(self.output_cap_bytes, on_output)
        stdout.feed(reply.stdout.encode())
        stderr.feed(reply.stderr.encode())
        result = CommandResult(self.name, call.argv, -15 if timed_out else reply.exit_status,
                               stdout.finish(), stderr.finish(), reply.duration_s,
                               stdout.dropped_bytes, stderr.dropped_bytes)
        if timed_out:
            raise CommandTimedOut(result, f"On host '{self.name}', `{result.command}` did not "
                                  f"finish within {timeout_s:g} s and was stopped.")
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def put(self, local_path: Path, remote_path: str) -> None:
        try:
            data = Path(local_path).read_bytes()
        except OSError as e:
            raise TransferFailed(f"Copying {local_path} to host '{self.name}' failed: "
                                 f"{e.strerror}.") from e
        self.write(remote_path, data)

    def get(self, remote_path: str, local_path: Path, *, max_bytes: int | None = None) -> int:
        path = _norm(remote_path)
        if path not in self.files:
            raise TransferFailed(f"On host '{self.name}', {remote_path} cannot be copied: "
                                 "no such regular file.")
        data = self.files[path]
        if max_bytes is not None and len(data) > max_bytes:
            raise TransferFailed(f"{self.name}:{remote_path} is larger than the {max_bytes} "
                                 "bytes allowed; it was not copied whole.")
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        Path(local_path).write_bytes(data)
        return len(data)

    def close(self) -> None:
        self.closed = True

    # --- files ------------------------------------------------------------------------------

    def write(self, path: str, data: bytes | str) -> None:
        """Put a file on the fake's disk (parents are created)."""
        path = _norm(path)
        self.files[path] = data.encode() if isinstance(data, str) else data
        self.dirs.update(str(p) for p in PurePosixPath(path).parents)

    def is_dir(self, path: str) -> bool:
        path = _norm(path)
        return path in self.dirs or any(f.startswith(path.rstrip("/") + "/") for f in self.files)

    # --- detached processes: simulated, on the fake clock -----------------------------------

    def start_detached(self, argv: list[str], *, name: str, env: Mapping[str, str] | None = None,
                       cwd: str | None = None) -> Detached:
        if not name or "/" in name:
            raise RunError(f"Detached process name {name!r} must be a non-empty single path part.")
        known = self._processes.get(name)
        if known is not None and self._status(known).running:
            raise RunError(
                f"On host '{self.name}', a detached process named '{name}' is already running; "
                "reattach to it with find_detached instead of starting it twice.")
        call = Call(tuple(argv), dict(env or {}), cwd)
        self.calls.append(call)
        self._next_pid += 1
        handle = Detached(self.name, name, self.detached_dir(name), self._next_pid)
        self._processes[name] = _Process(handle, self._handler(call.argv)(call), self.clock_s)
        self.write(f"{handle.state_dir}/pid", f"{handle.pid}\n")
        return handle

    def find_detached(self, name: str) -> Detached | None:
        process = self._processes.get(name)
        return process.handle if process else None

    def poll_detached(self, handle: Detached) -> DetachedStatus:
        return self._status(self._processes[handle.name])

    def wait_detached(self, handle: Detached, *, timeout_s: float,
                      poll_s: float = 0.5) -> DetachedStatus:
        process = self._processes[handle.name]
        if self._status(process).running:
            end = process.started_s + process.reply.duration_s
            self.clock_s = max(self.clock_s, min(end, self.clock_s + timeout_s))
        return self._status(process)

    def stop_detached(self, handle: Detached, *, signal: str = "TERM",
                      reach: supervisor.Reach = "wrapper") -> bool:
        process = self._processes.get(handle.name)
        if process is None or process.handle.pid != handle.pid or not self._status(
                process).running:
            return False
        process.ended = SIGNAL_EXIT.get(signal, 128 + 15)
        return True

    def end_detached(self, name: str, *, wait_s: float, remove: bool = False) -> bool:
        process = self._processes.get(name)
        if process is not None and self._status(process).running:
            process.ended = SIGNAL_EXIT["TERM"]
        if remove:
            self._processes.pop(name, None)
            self.run(["rm", "-rf", self.detached_dir(name)])
        return process is not None

    def detached_log(self, handle: Detached) -> str:
        reply = self._processes[handle.name].reply
        return reply.stdout + reply.stderr

    def _status(self, process: _Process) -> DetachedStatus:
        if process.lost:
            return DetachedStatus(running=False, exit_status=None, lost=True)
        if process.ended is not None:
            return DetachedStatus(running=False, exit_status=process.ended)
        if self.clock_s < process.started_s + process.reply.duration_s:
            return DetachedStatus(running=True, exit_status=None)
        return DetachedStatus(running=False, exit_status=process.reply.exit_status)

    def _handler(self, argv: tuple[str, ...]) -> Handler:
        for n in range(len(argv), 0, -1):
            if argv[:n] in self._handlers:
                return self._handlers[argv[:n]]
        program = argv[0] if argv else ""
        return lambda call: Reply(stderr=f"sh: 1: {program}: not found (no FakeHost handler)\n",
                                  exit_status=127)


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _read_stdin(stdin: Stdin) -> bytes:
    if stdin is None:
        return b""
    return stdin if isinstance(stdin, bytes) else b"".join(stdin)


def _printf(fmt: str, args: list[str]) -> str:
    """POSIX printf for %s, %%, \\n and \\t; the format is reused while arguments remain."""
    pieces = fmt.replace("\\n", "\n").replace("\\t", "\t").replace("%%", "\0").split("%s")
    slots, out = len(pieces) - 1, []
    while True:
        taken, args = [*args[:slots], *[""] * slots][:slots], args[slots:]
        out.append("".join(p + v for p, v in zip(pieces, [*taken, ""], strict=True)))
        if not args or not slots:
            return "".join(out).replace("\0", "%")


def _builtins(host: FakeHost) -> dict[tuple[str, ...], Handler]:
    """The few utilities the Host base class and most callers use, over the fake's files."""

    def cat(call: Call) -> Reply:
        if len(call.argv) == 1:
            return Reply(call.stdin.decode(errors="replace"))
        out: list[str] = []
        for path in call.argv[1:]:
            if _norm(path) not in host.files:
                return Reply("".join(out), f"cat: {path}: No such file or directory\n", 1)
            out.append(host.files[_norm(path)].decode(errors="replace"))
        return Reply("".join(out))

    def test(call: Call) -> Reply:
        flag, path = call.argv[1], _norm(call.argv[2])
        found = {"-e": path in host.files or host.is_dir(path), "-f": path in host.files,
                 "-d": host.is_dir(path), "-s": bool(host.files.get(path))}[flag]
        return Reply(exit_status=0 if found else 1)

    def mkdir(call: Call) -> Reply:
        for path in call.argv[2:]:
            host.dirs.add(_norm(path))
            host.dirs.update(str(p) for p in PurePosixPath(_norm(path)).parents)
        return Reply()

    def rm(call: Call) -> Reply:
        for path in (a for a in call.argv[1:] if not a.startswith("-")):
            path = _norm(path)
            host.files = {k: v for k, v in host.files.items()
                          if k != path and not k.startswith(path + "/")}
            host.dirs = {d for d in host.dirs if d != path and not d.startswith(path + "/")}
        return Reply()

    def df(call: Call) -> Reply:
        kib = host.free_bytes_value // 1024
        return Reply("Filesystem 1024-blocks Used Available Capacity Mounted on\n"
                     f"fake {kib * 2} {kib} {kib} 50% /\n")

    return {
        ("cat",): cat, ("test",): test, ("mkdir", "-p"): mkdir, ("rm",): rm,
        ("df", "-Pk"): df,
        ("printf",): lambda call: Reply(_printf(call.argv[1], list(call.argv[2:]))),
        ("echo",): lambda call: Reply(" ".join(call.argv[1:]) + "\n"),
        ("wc", "-c"): lambda call: Reply(f"{len(call.stdin)}\n"),
        ("sleep",): lambda call: Reply(duration_s=float(call.argv[1])),
        ("true",): lambda call: Reply(), ("false",): lambda call: Reply(exit_status=1),
    }
