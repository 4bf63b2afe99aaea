"""What a campaign has left on a target: containers, detached processes and run folders of its
attempts, and who holds the host's lease now.

A campaign removes each attempt's container or process and run folder once the attempt is
collected (`bench.target.discard`), so after it ends nothing of it should be on any target; a
killed controller or a host given up mid-run can leave some, which the next start of the
campaign collects. `subrun status` shows what is there, so nobody has to log in to find out.
One command per host, reading only. Names are matched by the campaign's prefix: a campaign whose
name is this one's followed by `-...` would be listed too.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.docker import LABEL_CAMPAIGN
from lab.host import Host
from lab.lease import HOST_LEASE, LeaseHolder, lease_folder, parse_holder

LIST = r"""
w=$1; c=$2; label=$3; lease=$4
if command -v docker > /dev/null 2>&1; then
  docker ps --all --filter "label=$label=$c" --format 'container {{.Names}} {{.State}}' 2>/dev/null
fi
for d in "$w"/detached/subrun-"$c"-* "$w"/detached/subrun-telemetry-"$c"-*; do
  [ -d "$d" ] || continue
  if [ -s "$d/exit" ]; then echo "process ${d##*/} exited"; else echo "process ${d##*/} running"; fi
done
for d in "$w"/runs/"$c"-*; do [ -d "$d" ] && echo "folder ${d##*/}"; done
if [ -s "$lease/holder" ]; then printf 'lease '; tr -d '\n' < "$lease/holder"; echo; fi
exit 0
"""


@dataclass(frozen=True)
class Leftovers:
    """A campaign's remains on one host, and the holder of the host's lease (anyone's)."""

    host: str
    containers: tuple[str, ...] = ()  # "name (state)"
    processes: tuple[str, ...] = ()  # "name (running|exited)"
    folders: tuple[str, ...] = ()
    lease: LeaseHolder | None = None

    @property
    def empty(self) -> bool:
        return not (self.containers or self.processes or self.folders)

    def line(self) -> str:
        """`h2: nothing of the campaign left` or what is left, and the lease's holder."""
        parts = [f"{len(items)} {what}{'s' if len(items) > 1 else ''} ({', '.join(items)})"
                 for what, items in (("container", self.containers),
                                     ("process", self.processes),
                                     ("run folder", self.folders)) if items]
        left = "left: " + "; ".join(parts) if parts else "nothing of the campaign left"
        held = f"; the host is held by {self.lease.describe()}" if self.lease else ""
        return f"{self.host}: {left}{held}"


def leftovers(host: Host, campaign: str) -> Leftovers:
    """What campaign left on host (one command)."""
    out = host.run(["sh", "-c", LIST, "sh", host.work_dir, campaign, LABEL_CAMPAIGN,
                    lease_folder(host, HOST_LEASE)], timeout_s=60).stdout
    found: dict[str, list[str]] = {"container": [], "process": [], "folder": []}
    holder = None
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "lease":
            holder = parse_holder(rest)
        elif kind in found and rest:
            name, _, state = rest.partition(" ")
            found[kind].append(f"{name} ({state})" if state else name)
    return Leftovers(host.name, tuple(found["container"]), tuple(found["process"]),
                     tuple(found["folder"]), holder)
