"""known_hosts read the way OpenSSH reads it, and added to by appending, never by rewriting.

The file is often the user's own `~/.ssh/known_hosts`, shared with OpenSSH and edited by hand, so
subrun must neither damage it nor be stopped by lines it cannot use:
- every line is classified, none is fatal: a host key; `@revoked` (honoured: that key is refused
  whoever presents it); `@cert-authority` (skipped: paramiko cannot verify host certificates, so
  such a host needs its own key recorded); malformed (skipped, and named with file:line when a
  host's key is then not found, since the line may have been meant for it);
- host patterns match as in OpenSSH: comma lists, `*` and `?`, `!` negation, `[host]:port`, and
  hashed names (`|1|salt|hash`, HMAC-SHA1 of the name);
- a first contact appends one line under an exclusive lock (re-reading the file first, so two
  processes meeting the same new host record it once), ends it with a newline and syncs it to
  disk; comments, multi-host lines and lines for other tools stay byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import AccessRefused

REVOKED, CERT_AUTHORITY = "@revoked", "@cert-authority"
MARKERS = (REVOKED, CERT_AUTHORITY)
MAX_BYTES = 16 * 1024 * 1024  # a known_hosts pointed at /dev/zero must not fill the memory


@dataclass(frozen=True)
class KnownKey:
    """One usable line: its host patterns, key, marker (None for a plain host key) and line."""

    patterns: str
    key_type: str
    key_b64: str
    line: int
    marker: str | None = None

    def same_key(self, key_type: str, key_b64: str) -> bool:
        return (self.key_type, self.key_b64) == (key_type, key_b64)


@dataclass(frozen=True)
class Malformed:
    """A line that is not a valid known_hosts entry, and why."""

    line: int
    reason: str


@dataclass
class KnownHosts:
    """The entries of one known_hosts file (an absent file has none)."""

    path: Path
    keys: list[KnownKey] = field(default_factory=list)
    malformed: list[Malformed] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> KnownHosts:
        """Parse path; an absent file is an empty one, an unreadable one a final AccessRefused."""
        try:
            with Path(path).open("rb") as f:
                data = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return cls(Path(path))
        except OSError as e:
            raise AccessRefused(f"{path}: the known_hosts file cannot be read ({e.strerror}); "
                                "fix `known_hosts:` in hosts.yaml or the file itself.") from e
        if len(data) > MAX_BYTES:
            raise AccessRefused(f"{path}: the known_hosts file is larger than {MAX_BYTES} bytes, "
                                "which no real one is; fix `known_hosts:` in hosts.yaml.")
        return cls.parse(Path(path), data.decode("utf-8", errors="replace"))

    @classmethod
    def parse(cls, path: Path, text: str) -> KnownHosts:
        """Classify every line of text (the content of path)."""
        found = cls(path)
        for number, raw in enumerate(text.splitlines(), start=1):
            entry = _parse_line(raw.strip(), number)
            if isinstance(entry, Malformed):
                found.malformed.append(entry)
            elif entry is not None:
                found.keys.append(entry)
        return found

    def host_keys(self, host: str) -> list[KnownKey]:
        """The keys recorded for host (a `host_entry`), revoked ones left out."""
        return [k for k in self.keys if k.marker is None and matches(k.patterns, host)
                and self.revoked(k.key_type, k.key_b64) is None]

    def revoked(self, key_type: str, key_b64: str) -> KnownKey | None:
        """The `@revoked` line of this key, if any (it applies to every host, as in OpenSSH)."""
        return next((k for k in self.keys if k.marker == REVOKED and k.same_key(key_type, key_b64)),
                    None)

    def notes(self, host: str) -> str:
        """Why host may have no usable key here: CA lines for it, and malformed lines."""
        notes = []
        authorities = [k.line for k in self.keys if k.marker == CERT_AUTHORITY
                       and matches(k.patterns, host)]
        if authorities:
            notes.append(f"{_lines(self.path, authorities)} trusts a certificate authority for "
                         "this host, but subrun (paramiko) cannot verify host certificates, so "
                         "it needs the host's own key recorded as well.")
        if self.malformed:
            shown = "; ".join(f"{self.path}:{m.line}: {m.reason}" for m in self.malformed[:5])
            more = f" (and {len(self.malformed) - 5} more)" if len(self.malformed) > 5 else ""
            notes.append(f"Lines skipped as malformed, in case one was meant for this host: "
                         f"{shown}{more}.")
        return " ".join(notes)


def host_entry(address: str, port: int) -> str:
    """The name a host is recorded under: `address`, or `[address]:port` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


def matches(patterns: str, host: str) -> bool:
    """Whether host matches a known_hosts host field (OpenSSH's rules, negation included)."""
    if patterns.startswith("|1|"):
        return _hashed_match(patterns, host)
    found = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if _wildcard(pattern[1:] if negated else pattern).fullmatch(host.lower()):
            if negated:
                return False
            found = True
    return found


def append_key(path: Path, host: str, key_type: str, key_b64: str) -> KnownKey | None:
    """Record host's key at the end of path under an exclusive lock; return a different key
    of the same type already recorded for host instead (the file is then left as it was)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # as ~/.ssh should be
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # dropped by close; OpenSSH itself appends in one write
        current = KnownHosts.read(path)  # another process may have met this host meanwhile
        for known in current.host_keys(host):
            if known.same_key(key_type, key_b64):
                return None
            if known.key_type == key_type:
                return known
        line = f"{host} {key_type} {key_b64}\n".encode()
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a last line without its newline stays a line of its own
        os.write(fd, line)
        os.fsync(fd)
        return None
    finally:
        os.close(fd)


def _parse_line(line: str, number: int) -> KnownKey | Malformed | None:
    if not line or line.startswith("#"):
        return None
    fields = line.split()
    marker = fields.pop(0) if fields[0].startswith("@") else None
    if marker is not None and marker not in MARKERS:
        return Malformed(number, f"unknown marker '{marker}' (OpenSSH knows "
                                 f"{' and '.join(MARKERS)})")
    if len(fields) < 3:
        return Malformed(number, "expected host names, a key type and a base64 key")
    patterns, key_type, key_b64 = fields[:3]
    problem = _key_problem(key_type, key_b64)
    if problem:
        return Malformed(number, problem)
    return KnownKey(patterns, key_type, key_b64, number, marker)


def _key_problem(key_type: str, key_b64: str) -> str | None:
    """Why key_b64 is not an SSH public key blob of key_type, or None when it is one."""
    try:
        blob = base64.b64decode(key_b64, validate=True)
    except (binascii.Error, ValueError):
        return "the key is not valid base64"
    if len(blob) < 4:
        return "the key is too short to be an SSH public key"
    (length,) = struct.unpack(">I", blob[:4])
    if blob[4:4 + length] != key_type.encode():
        return f"the key's data is not a '{key_type}' key"
    return None


def _wildcard(pattern: str) -> re.Pattern[str]:
    text = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                   for c in pattern.lower())
    return re.compile(text, re.DOTALL)


def _hashed_match(patterns: str, host: str) -> bool:
    try:
        _, _, salt, digest = patterns.split("|")
        mac = hmac.new(base64.b64decode(salt), host.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(mac, base64.b64decode(digest))
    except (ValueError, binascii.Error):
        return False


def _lines(path: Path, numbers: list[int]) -> str:
    return ", ".join(f"{path}:{n}" for n in numbers)
