"""Names a person writes that end up as folder names or host names, checked where they enter.

A submitter, system, benchmark or campaign name becomes one folder of a path: with `/` or `..` it
would write outside the tree or the output folder. An `ssh_alias` is looked up in ~/.ssh/config,
where a `Match exec` rule may paste it (`%h`) into a shell command run on the controller: only a
host name's characters are let through.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from lab.errors import ConfigError

FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,252}")


def folder_name(value: str) -> str:
    """value, when it is a safe folder name; else ValueError saying what is allowed."""
    if not FOLDER_NAME.fullmatch(value):
        raise ValueError(f"{value!r} cannot be a folder name: use letters, digits and '_', '-', "
                         "'.', '+' (starting with a letter or digit, at most 128), e.g. Acme_Labs")
    return value


def host_name(value: str) -> str:
    """value, when it is a host name or address; else ValueError saying what is allowed."""
    if not HOST_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a host name: use letters, digits and '_', '-', '.', "
                         "':' (not starting with '-', at most 253), as in a Host line of "
                         "~/.ssh/config")
    return value


def path_part(value: str, what: str) -> str:
    """value, when it is exactly one folder of a path (whatever its characters); else a
    ConfigError: the last guard before a name is joined into a path."""
    if value in ("", ".", "..") or "/" in value or "\0" in value:
        raise ConfigError(f"The {what} {value!r} is not a single folder name ('/', '..' and "
                          "empty names would put files outside the tree); fix the name where "
                          "it is set (campaign file or hosts.yaml).")
    return value


FolderName = Annotated[str, AfterValidator(folder_name)]
HostName = Annotated[str, AfterValidator(host_name)]
