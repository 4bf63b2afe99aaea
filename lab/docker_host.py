"""Which DOCKER_HOST values a host may name: the engine's API is root on the target.

A Docker engine answers anyone who reaches its API, and a container it starts can mount the
host's `/`. A unix socket is guarded by its file permissions and `ssh://` by SSH keys; a plain
`tcp://` endpoint has no authentication at all, so only one on the loopback interface is taken
(e.g. a port forward). TLS-protected tcp needs certificates subrun does not manage.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

_SSH = re.compile(r"^ssh://([A-Za-z0-9_.-]+@)?[A-Za-z0-9_.-]+(:\d{1,5})?$")
_UNIX = re.compile(r"^unix:///[^\x00-\x1f]*$")


def check_docker_host(value: str) -> None:
    """ValueError saying what to write instead when value is not a private Docker endpoint."""
    if _UNIX.match(value) or _SSH.match(value):
        return
    if value.startswith("tcp://"):
        try:
            host = urlsplit(value).hostname or ""
            private = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            private = False
        if private:
            return
        raise ValueError(f"docker_host '{value}' is a plain TCP Docker API, which lets anyone "
                         "who reaches it be root on the target; use unix:///var/run/docker.sock "
                         "or ssh://user@host, or tcp:// on 127.0.0.1 only (e.g. through an "
                         "SSH tunnel)")
    raise ValueError(f"docker_host '{value}' is not a Docker endpoint subrun takes; write "
                     "unix:///path/to/docker.sock, ssh://user@host or tcp://127.0.0.1:PORT")
