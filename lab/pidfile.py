"""Pid files that name one process, not one number: the pid with its start time and command line.

A pid outlives its process: after a crash or a reboot the number in a stale pid file may belong
to an unrelated process, and signalling it by number would stop someone else's work. So a pid
file records when the process started and how it was called, and a process is taken for the
recorded one only when both still match. Files of older versions (a bare pid) are matched by
the command line alone.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

START_TOLERANCE_S = 0.05  # create_time is derived from boot time and clock ticks


@dataclass(frozen=True)
class PidRecord:
    """A process as recorded: pid, start time (epoch s) and command line."""

    pid: int
    started: float | None
    cmdline: tuple[str, ...]


def write(path: Path, pid: int, cmdline: Sequence[str]) -> PidRecord:
    """Record the process pid, started as cmdline, in path (atomically); return the record.

    cmdline is what the caller started, not read back: right after a start the process may
    still be inside exec, with no command line of its own yet."""
    try:
        started = psutil.Process(pid).create_time()  # set at fork: exec does not change it
    except psutil.Error:  # it ended at once: whatever gets the pid next is not it
        started = 0.0
    record = PidRecord(pid, started, tuple(cmdline))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": pid, "started": record.started,
                               "cmdline": list(record.cmdline)}) + "\n")
    tmp.replace(path)
    return record


def read(path: Path) -> PidRecord | None:
    """The record in path; None when there is none or it cannot be understood."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text.isdigit():  # a bare pid, as older versions wrote
        return PidRecord(int(text), None, ())
    try:
        data = json.loads(text)
        return PidRecord(int(data["pid"]), float(data["started"]), tuple(data["cmdline"]))
    except (ValueError, KeyError, TypeError):
        return None


def process(record: PidRecord, expect: Sequence[str] = ()) -> psutil.Process | None:
    """The recorded process if it still runs (same start time and command line, and the
    command line holds every word of expect); None when the pid is gone or is someone else."""
    try:
        proc = psutil.Process(record.pid)
        started, cmdline = proc.create_time(), tuple(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if record.started is not None and abs(started - record.started) > START_TOLERANCE_S:
        return None
    if record.cmdline and cmdline != record.cmdline:
        return None
    if any(word not in cmdline for word in expect):
        return None
    return proc


def remove(path: Path) -> None:
    """Delete path if it is there."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
