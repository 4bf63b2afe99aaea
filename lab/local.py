"""The controller itself as a target: subprocesses, with the same contract as SSH hosts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from lab.errors import CommandFailed, CommandTimedOut, ConnectError
from lab.host import DEFAULT_TIMEOUT_S, CommandResult, Host, OutputSink, Stdin


class LocalHost(Host):
    """Runs commands on this machine; used for the embedded default and as the controller."""

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
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env={**os.environ, **env} if env else None,
                start_new_session=True,  # so a timeout can stop the whole process group
            )
        except FileNotFoundError as e:
            result = CommandResult(self.name, argv, 127, "", str(e), 0.0)
            if check:
                raise CommandFailed(result, f"On host '{self.name}', `{result.command}` could "
                                    f"not start: {e.strerror}: {e.filename}.") from e
            return result
        stdout: list[str] = []
        stderr: list[str] = []
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, stdout, on_output), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, stderr, on_output), daemon=True),
        ]
        for t in readers:
            t.start()
        if stdin is not None:
            _feed(proc, stdin)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        for t in readers:
            t.join(timeout=10)
        result = CommandResult(
            self.name, argv, proc.returncode, "".join(stdout), "".join(stderr),
            time.monotonic() - started,
        )
        if timed_out:
            raise CommandTimedOut(result, f"On host '{self.name}', `{result.command}` did not "
                                  f"finish within {timeout_s:g} s and was stopped.")
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def put(self, local_path: Path, remote_path: str) -> None:
        _copy(Path(local_path), Path(remote_path), self.name)

    def get(self, remote_path: str, local_path: Path) -> None:
        _copy(Path(remote_path), Path(local_path), self.name)


def _copy(src: Path, dst: Path, host: str) -> None:
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    except OSError as e:
        raise ConnectError(f"On host '{host}', copying {src} to {dst} failed: {e}.") from e


def _pump(stream: IO[bytes] | None, sink: list[str], on_output: OutputSink | None) -> None:
    assert stream is not None
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        sink.append(line)
        if on_output:
            on_output(line.rstrip("\n"))
    stream.close()


def _feed(proc: subprocess.Popen[bytes], stdin: Stdin) -> None:
    assert proc.stdin is not None
    chunks = [stdin] if isinstance(stdin, bytes) else stdin
    try:
        for chunk in chunks or []:
            proc.stdin.write(chunk)
    except BrokenPipeError:
        pass  # the command stopped reading; its exit status says why
    finally:
        proc.stdin.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()
