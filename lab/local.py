"""The controller itself as a target: subprocesses, with the same contract as SSH hosts."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from lab.errors import CommandFailed, CommandTimedOut, TransferFailed
from lab.host import DEFAULT_TIMEOUT_S, CommandResult, Host, OutputSink, Stdin
from lab.output import CHUNK_BYTES, OutputTail


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
        stdout = OutputTail(self.output_cap_bytes, on_output)
        stderr = OutputTail(self.output_cap_bytes, on_output)
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, stdout), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, stderr), daemon=True),
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
            self.name, argv, proc.returncode, stdout.finish(), stderr.finish(),
            time.monotonic() - started, stdout.dropped_bytes, stderr.dropped_bytes,
        )
        if timed_out:
            raise CommandTimedOut(result, f"On host '{self.name}', `{result.command}` did not "
                                  f"finish within {timeout_s:g} s and was stopped.")
        if check and not result.ok:
            raise CommandFailed(result)
        return result

    def put(self, local_path: Path, remote_path: str) -> None:
        _copy(Path(local_path), Path(remote_path), self.name)

    def get(self, remote_path: str, local_path: Path, *, max_bytes: int | None = None) -> int:
        try:
            fd = os.open(remote_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            raise TransferFailed(f"On host '{self.name}', {remote_path} cannot be copied: "
                                 f"{e.strerror} (a symlink is never followed).") from e
        with open(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise TransferFailed(f"On host '{self.name}', {remote_path} is not a regular "
                                     "file, so it is not copied.")
            try:
                return _copy_stream(src, Path(local_path), max_bytes,
                                    f"{self.name}:{remote_path}")
            except OSError as e:
                raise _copy_failed(self.name, remote_path, local_path, e) from e


def _copy(src: Path, dst: Path, host: str) -> None:
    try:
        with src.open("rb") as f:
            _copy_stream(f, dst, None, f"{host}:{src}")
    except OSError as e:
        raise _copy_failed(host, src, dst, e) from e


def _copy_failed(host: str, src: str | Path, dst: str | Path, e: OSError) -> TransferFailed:
    """A local copy has no link to drop: what failed is a file or a folder, so it is final."""
    where = f" ({e.filename})" if e.filename else ""
    return TransferFailed(f"On host '{host}', copying {src} to {dst} failed: "
                          f"{e.strerror or e}{where}. Check that the source exists and is "
                          "readable and that the destination's folder is writable and has "
                          "room; copying again will not help until then.")


def _copy_stream(src: IO[bytes], dst: Path, max_bytes: int | None, what: str) -> int:
    """Copy src to dst in chunks, refusing more than max_bytes; return the bytes copied."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    copied = 0
    with dst.open("wb") as out:
        while chunk := src.read(CHUNK_BYTES * 16):
            copied += len(chunk)
            if max_bytes is not None and copied > max_bytes:
                raise TransferFailed(f"{what} is larger than the {max_bytes} bytes allowed; "
                                     "it was not copied whole.")
            out.write(chunk)
    return copied


def _pump(stream: IO[bytes] | None, sink: OutputTail) -> None:
    assert stream is not None
    while chunk := stream.read1(CHUNK_BYTES):  # type: ignore[attr-defined]
        sink.feed(chunk)
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
