"""A target's Python, as a native environment needs it: version, platform, venv support.

Hosts without Docker run benchmarks in a venv made from their own interpreter, with wheels
downloaded on the controller. Before anything is sent, one probe asks that interpreter what it
is, and pure checks here say whether the benchmark's wheels can work with it: the same Python
minor version, venv support (Debian and Ubuntu ship it separately, as python3-venv), glibc, and
wheel tags that fit the interpreter's architecture and C library. Each problem is one paragraph
naming the host and the benchmark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ImageError
from lab.host import Host

# Standard library only, and no syntax newer than Python 3.5: an old interpreter must still
# answer, so that the error can say which version it is.
PROBE = r"""
import json, platform, struct, sys
try:
    import ensurepip, venv
    has_venv = True
except ImportError:
    has_venv = False
libc, libc_version = platform.libc_ver()
print(json.dumps({"executable": sys.executable, "version": platform.python_version(),
                  "machine": platform.machine(), "bits": struct.calcsize("P") * 8,
                  "libc": libc, "libc_version": libc_version, "venv": has_venv}))
"""
PROBE_TIMEOUT_S = 60.0
# A 32-bit userland on a 64-bit kernel (common on Raspberry Pi OS) reports the kernel's machine.
_USERLAND_32 = {"x86_64": "i686", "aarch64": "armv7l"}
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(.+)$")


@dataclass(frozen=True)
class Interpreter:
    """What a host's Python reported about itself."""

    command: str  # as configured in hosts.yaml (`native: {python: ...}`)
    executable: str
    version: str  # e.g. "3.11.2"
    machine: str  # the userland's architecture as wheel tags name it: x86_64, aarch64, armv7l
    glibc: tuple[int, int] | None  # None for another C library (musl)
    venv: bool  # venv and ensurepip importable

    @property
    def minor(self) -> str:
        """"3.11" of "3.11.2"."""
        return ".".join(self.version.split(".")[:2])

    @property
    def described(self) -> str:
        libc = f"glibc {self.glibc[0]}.{self.glibc[1]}" if self.glibc else "no glibc"
        return f"Python {self.version} ({self.executable}) on {self.machine}, {libc}"


def probe_interpreter(host: Host, command: str, benchmark: str) -> Interpreter:
    """Ask the host's interpreter what it is; a missing one is an ImageError saying what to do."""
    result = host.run([command, "-c", PROBE], check=False, timeout_s=PROBE_TIMEOUT_S)
    if result.exit_status == 127 or "not found" in result.stderr.lower():
        raise ImageError(
            f"Host '{host.name}' has no `{command}`, so benchmark '{benchmark}' cannot run "
            "natively there (hosts.yaml says it has no Docker engine). Install Python and its "
            "venv module (Debian/Ubuntu: `apt-get install python3 python3-venv`), or point "
            f"`native: {{python: ...}}` for host '{host.name}' in hosts.yaml at an interpreter "
            "it has.")
    if not result.ok:
        raise ImageError(f"On host '{host.name}', `{command}` could not report its version and "
                         f"platform for benchmark '{benchmark}' (exit status "
                         f"{result.exit_status}); it needs to be a working Python 3.\n"
                         f"--- last lines of its output ---\n{result.tail(8)}")
    return parse_probe(result.stdout, command)


def parse_probe(text: str, command: str) -> Interpreter:
    """An Interpreter from the probe's JSON line (pure, for tests on captured output)."""
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        raise ImageError(f"`{command}` printed no platform report: {text.strip()[-200:]!r}")
    data = json.loads(lines[-1])
    machine = str(data["machine"])
    if int(data.get("bits", 64)) == 32:
        machine = _USERLAND_32.get(machine, machine)
    glibc = None
    if data.get("libc") == "glibc":
        major, minor = (int(part) for part in str(data["libc_version"]).split(".")[:2])
        glibc = (major, minor)
    return Interpreter(command=command, executable=str(data["executable"]),
                       version=str(data["version"]), machine=machine, glibc=glibc,
                       venv=bool(data["venv"]))


def check_interpreter(interpreter: Interpreter, python: str, host: str, benchmark: str) -> None:
    """Refuse an interpreter the benchmark's wheels (built for Python `python`) cannot serve."""
    where = f"Host '{host}' runs {interpreter.described}"
    if interpreter.minor != python:
        raise ImageError(
            f"{where}, but benchmark '{benchmark}' is built for Python {python} (`build.python` "
            f"in its benchmark.yaml; its wheels are cp{python.replace('.', '')}). Install "
            f"Python {python} on the host and set `native: {{python: python{python}}}` for it "
            "in hosts.yaml.")
    if not interpreter.venv:
        raise ImageError(
            f"{where}, but that Python cannot make virtual environments (no venv/ensurepip "
            f"module), which benchmark '{benchmark}' needs to run natively. Install its venv "
            f"support (Debian/Ubuntu: `apt-get install python3-venv`, or python{python}-venv).")
    if interpreter.glibc is None:
        raise ImageError(
            f"{where}: its C library is not glibc, and the wheels of benchmark '{benchmark}' "
            "are manylinux builds, which need glibc. Use a glibc-based system (or a Python "
            "built against glibc) for native runs.")


def incompatible_wheels(wheels: Iterable[Path], interpreter: Interpreter) -> list[str]:
    """The names of the wheels interpreter cannot install (pure: from the file names' tags)."""
    return [wheel.name for wheel in wheels if not wheel_fits(wheel.name, interpreter)]


def wheel_fits(filename: str, interpreter: Interpreter) -> bool:
    """True when a wheel's Python, ABI and platform tags fit the interpreter."""
    parts = filename[:-len(".whl")].split("-")
    if len(parts) < 5:
        return False
    python_tags, abi_tags, platform_tags = (set(p.split(".")) for p in parts[-3:])
    return (_python_fits(python_tags, abi_tags, interpreter.minor)
            and any(_platform_fits(tag, interpreter) for tag in platform_tags))


def _python_fits(python_tags: set[str], abi_tags: set[str], minor: str) -> bool:
    major, minor_number = (int(part) for part in minor.split("."))
    cpython = f"cp{major}{minor_number}"
    if python_tags & {"py3", f"py{major}{minor_number}", cpython}:
        return abi_tags & {"none", "abi3", cpython} != set()
    if "abi3" in abi_tags:  # a stable-ABI wheel built for an older CPython 3 still fits
        return any(t.startswith("cp3") and t[3:].isdigit() and int(t[3:]) <= minor_number
                   for t in python_tags)
    return False


def _platform_fits(tag: str, interpreter: Interpreter) -> bool:
    if tag == "any":
        return True
    if tag == f"linux_{interpreter.machine}":
        return True
    for legacy, glibc in _LEGACY_MANYLINUX.items():
        if tag == f"{legacy}_{interpreter.machine}":
            return interpreter.glibc is not None and interpreter.glibc >= glibc
    found = _MANYLINUX.match(tag)
    if found and found.group(3) == interpreter.machine:
        needed = (int(found.group(1)), int(found.group(2)))
        return interpreter.glibc is not None and interpreter.glibc >= needed
    return False
