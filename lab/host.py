"""The transport contract every target is reached through: run, put, get, detached processes.

`LocalHost` and `SshHost` implement `run`, `put`, `get`; everything else, including detached
processes that outlive the connection that started them, is built on `run` here, so both
transports behave the same and share one contract test.
"""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lab import supervisor
from lab.errors import CommandFailed, RunError, TransferFailed
from lab.output import DEFAULT_OUTPUT_CAP_BYTES

OutputSink = Callable[[str], None]
Stdin = bytes | Iterable[bytes] | None

DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left behind: exit status, output, and how long it took."""

    host: str
    argv: tuple[str, ...]
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float
    # bytes from the start of each stream that were not kept (see lab.output: output is capped)
    stdout_dropped_bytes: int = 0
    stderr_dropped_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def truncated(self) -> bool:
        """True when the output was longer than the host's cap and only its end was kept."""
        return bool(self.stdout_dropped_bytes or self.stderr_dropped_bytes)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def tail(self, lines: int = 20) -> str:
        """The last lines of stdout then stderr, for error messages."""
        text = (self.stdout.rstrip("\n") + "\n" + self.stderr.rstrip("\n")).strip("\n")
        shown = "\n".join(text.splitlines()[-lines:])
        if not self.truncated:
            return shown
        dropped = self.stdout_dropped_bytes + self.stderr_dropped_bytes
        return f"(output truncated: its first {dropped} bytes were not kept)\n{shown}"


@dataclass(frozen=True)
class Detached:
    """A handle on a process started with `start_detached`; enough to find it again later."""

    host: str
    name: str
    state_dir: str
    pid: int

    @property
    def log_path(self) -> str:
        return f"{self.state_dir}/out.log"


@dataclass(frozen=True)
class DetachedStatus:
    """Whether a detached process still runs, and its exit status once it has ended."""

    running: bool
    exit_status: int | None
    lost: bool = False  # neither running nor with a recorded exit (killed with SIGKILL, reboot)


class Host(ABC):
    """A target machine. Subclasses provide the transport; argv is never a shell string."""

    def __init__(self, name: str, work_dir: str,
                 output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES) -> None:
        self.name = name
        self.work_dir = work_dir
        self.output_cap_bytes = output_cap_bytes  # per stream; only the end of longer output

    @abstractmethod
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
        """Run argv to completion; raise CommandFailed on a non-zero exit when check is set.

        stdout and stderr keep at most `output_cap_bytes` each (their end); the result counts
        what was dropped, so no command's output can exhaust the controller's memory."""

    @abstractmethod
    def put(self, local_path: Path, remote_path: str) -> None:
        """Copy one local file to the host, creating parent directories."""

    @abstractmethod
    def get(self, remote_path: str, local_path: Path, *, max_bytes: int | None = None) -> int:
        """Copy one regular file from the host to a local path in chunks, creating parent
        directories; return its size. A symlink, a special file, or (with max_bytes) a file
        larger than max_bytes raises TransferFailed, which no retry can fix."""

    def close(self) -> None:  # noqa: B027 - optional hook, local transport has nothing to close
        """Release the connection, if any."""

    def ensure_reachable(self) -> None:  # noqa: B027 - optional hook, a local host is always up
        """Raise HostUnreachable when the host was given up (its outage budget spent)."""

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- built on run -------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """True when a file or directory exists at path on the host."""
        return self.run(["test", "-e", path], check=False, timeout_s=30).ok

    def read_text(self, path: str, *, timeout_s: float = 60) -> str:
        """The content of a small text file on the host; one longer than the output cap is
        refused rather than silently cut (copy it with `get` instead)."""
        result = self.run(["cat", path], timeout_s=timeout_s)
        if result.truncated:
            raise TransferFailed(f"On host '{self.name}', {path} is longer than the "
                                 f"{self.output_cap_bytes} bytes a command's output may keep, "
                                 "so it is not read as text; copy it with `get`, or raise "
                                 "`limits.output_max_bytes` in hosts.yaml.")
        return result.stdout

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents on the host."""
        self.run(["mkdir", "-p", path], timeout_s=30)

    def free_bytes(self, path: str) -> int | None:
        """Free space of the filesystem holding path, or None when `df` cannot tell."""
        result = self.run(["df", "-Pk", path], check=False, timeout_s=30)
        lines = result.stdout.strip().splitlines()
        if not result.ok or len(lines) < 2:
            return None
        return int(lines[-1].split()[3]) * 1024

    def detached_dir(self, name: str) -> str:
        return str(PurePosixPath(self.work_dir) / "detached" / name)

    def start_detached(
        self,
        argv: list[str],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Detached:
        """Start argv so that it survives this connection; find it again with `find_detached`."""
        if not name or "/" in name:
            raise RunError(f"Detached process name {name!r} must be a non-empty single path part.")
        state_dir = self.detached_dir(name)
        status = self._detached_status(state_dir)
        if status.running:
            raise RunError(
                f"On host '{self.name}', a detached process named '{name}' is already running; "
                "reattach to it with find_detached instead of starting it twice."
            )
        inner = list(argv)
        if env:
            inner = ["env", *(f"{k}={v}" for k, v in env.items()), *inner]
        if cwd:
            inner = ["sh", "-c", 'cd "$0" && exec "$@"', cwd, *inner]
        result = self.run(["sh", "-c", supervisor.START, "sh", state_dir, supervisor.WRAPPER,
                           *inner],
                          timeout_s=60)
        try:
            pid = int(result.stdout.strip())
        except ValueError as e:
            raise CommandFailed(result, f"On host '{self.name}', detached process '{name}' did "
                                f"not report its pid: {result.tail(5)!r}") from e
        return Detached(host=self.name, name=name, state_dir=state_dir, pid=pid)

    def find_detached(self, name: str) -> Detached | None:
        """The handle of a detached process started earlier under name, or None."""
        state_dir = self.detached_dir(name)
        result = self.run(["cat", f"{state_dir}/pid"], check=False, timeout_s=30)
        if not result.ok or not result.stdout.strip().isdigit():
            return None
        return Detached(self.name, name, state_dir, int(result.stdout.strip()))

    def poll_detached(self, handle: Detached) -> DetachedStatus:
        """Whether the detached process still runs, or how it ended."""
        return self._detached_status(handle.state_dir)

    def wait_detached(
        self, handle: Detached, *, timeout_s: float, poll_s: float = 0.5
    ) -> DetachedStatus:
        """Poll until the detached process ends or timeout_s passes (then it still runs)."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.poll_detached(handle)
            if not status.running or time.monotonic() >= deadline:
                return status
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))

    def stop_detached(self, handle: Detached, *, signal: str = "TERM",
                      reach: supervisor.Reach = "wrapper") -> bool:
        """Signal the detached command's wrapper (which passes TERM on and records the exit
        status), its whole process group, or the wrapper's children; False, and nothing
        signalled, when the recorded pid is no longer that wrapper (it ended; the pid may
        now be another process's)."""
        result = self.run(["sh", "-c", supervisor.SIGNAL, "sh", handle.state_dir,
                           str(handle.pid), signal, reach], check=False, timeout_s=30)
        return result.stdout.strip() == "signalled"

    def end_detached(self, name: str, *, wait_s: float, remove: bool = False) -> bool:
        """End the detached process started under name, if it still runs, in one round trip:
        TERM to its wrapper, its whole group killed if it outlives wait_s; then remove its
        state folder when asked. False when no process was recorded under name."""
        result = self.run(["sh", "-c", supervisor.END, "sh", self.detached_dir(name),
                           str(max(0, round(wait_s / 0.05))), "yes" if remove else "no"],
                          timeout_s=wait_s + 30)
        return result.stdout.strip() == "ended"

    def detached_log(self, handle: Detached) -> str:
        """Everything the detached process wrote to stdout and stderr so far."""
        return self.run(["cat", handle.log_path], check=False, timeout_s=60).stdout

    def _detached_status(self, state_dir: str) -> DetachedStatus:
        out = self.run(["sh", "-c", supervisor.STATUS, "sh", state_dir],
                       timeout_s=30).stdout.strip()
        if out.startswith("exit "):
            return DetachedStatus(running=False, exit_status=int(out.split()[1]))
        if out == "running":
            return DetachedStatus(running=True, exit_status=None)
        return DetachedStatus(running=False, exit_status=None, lost=out == "lost")
