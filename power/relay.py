"""The bridge between power-dev's client and a workload callable.

power-dev's client runs one shell command per phase (`-w`), twice: ranging, then testing. The
official path gives it `python -m power.relay <socket>`, which asks the `RelayServer` in the
session's process to run the next phase of the workload callable and exits 0 when it has
finished (1 when it failed), so the same callable serves both subrun's path and the official.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import sys
import tempfile
import threading
from pathlib import Path

from power.phase import PhaseName, Workload, WorkloadCall

PHASES: tuple[PhaseName, ...] = ("ranging", "testing")


class RelayServer:
    """Runs the workload's phases in order, one per relay connection, on a Unix socket."""

    def __init__(self, workload: Workload, loadgen_dir: Path, *, short_ranging: bool) -> None:
        self.workload = workload
        self.loadgen_dir = loadgen_dir
        self.short_ranging = short_ranging
        self.calls = 0
        self.errors: list[BaseException] = []
        self._dir = tempfile.TemporaryDirectory(prefix="subrun-relay-")
        self.path = Path(self._dir.name) / "relay.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        self._sock.listen(1)
        self._thread = threading.Thread(target=self._serve, name="relay", daemon=True)

    def command(self, python: str) -> str:
        """The `-w` shell command for power-dev's client."""
        return shlex.join([python, "-m", "power.relay", str(self.path)])

    def __enter__(self) -> RelayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
        self._thread.join(timeout=5)
        self._dir.cleanup()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed on exit
            with conn:
                if conn.makefile().readline().strip() != "run":
                    continue  # not our relay command
                reply = self._run_next()
                # if the relay command was killed, power-dev's client reports it
                with contextlib.suppress(OSError):
                    conn.sendall(reply.encode() + b"\n")

    def _run_next(self) -> str:
        if self.calls >= len(PHASES):
            return "error: power-dev's client asked for a third workload run"
        phase = PHASES[self.calls]
        self.calls += 1
        try:
            self.workload(WorkloadCall(phase, self.loadgen_dir / phase,
                                       phase == "ranging" and self.short_ranging))
        except Exception as e:  # reported to the relay command, kept for the session
            self.errors.append(e)
            return f"error: {phase} workload failed: {e}".replace("\n", " ")
        return "ok"


def main(argv: list[str] | None = None) -> int:
    """Ask the relay server to run the next phase; exit 0 when it succeeded."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m power.relay <socket>\n")
        return 2
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(args[0])
            sock.sendall(b"run\n")
            reply = sock.makefile().readline().strip()
    except OSError as e:
        reply = f"error: cannot reach subrun's relay at {args[0]}: {e}"
    if reply != "ok":
        sys.stderr.write(f"{reply or 'error: the relay server closed the connection'}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
