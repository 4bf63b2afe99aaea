"""Leases that live on the target: a host (or an analyzer's host) measures one run at a time,
whichever controller, campaign or mode asks, with or without a Prefect server.

A lease is a `flock` on `<work_dir>/leases/<name>/lock`, held by a small process on the target
that the taker starts in a session of its own (so neither a closed SSH channel nor a killed
controller takes it down with them). The holder writes who holds the lease (campaign, run,
controller host and pid, since when) beside the lock, so a run that waits can say whom it waits
for. The taker renews the lease by writing a beat file every `RENEW_S`; the holder lets the
lock go when the taker releases it, or when no beat came for `BOUND_S` *and* no container or
process of the holder's campaign runs on the target. So a holder whose controller died is taken
over at most `BOUND_S` (plus a check of `CHECK_S`) after its last beat, or after its campaign's
last run on the host ends, whichever is later: a run left running by a killed controller is
never measured over by another campaign. A controller that starts its own campaign again on
the same machine takes over at once a lease whose holder process is gone: it reattaches to that
campaign's runs anyway.

Kernel locks, not lock files: a lock dies with its holder process, so no stale file can keep a
host held for ever, and two takers racing for a free host cannot both win.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import PurePosixPath

import psutil

from lab.cuts import through_cuts
from lab.docker import LABEL_CAMPAIGN
from lab.errors import ConnectionLost, RunCancelled, RunError, SubrunError
from lab.host import Host

BOUND_S = 45  # no beat for this long, and nothing of its campaign running: the lease lapses
RENEW_S = 15.0  # how often the taker renews its beat
CHECK_S = 5  # how often the holder looks at its beat
ANSWER_S = 20.0  # how long a taker waits for its holder to answer held or busy
POLL_S = 2.0  # while waiting: how often to try again, and to look for a cancel
RECORD_S = 0.2  # a lease whose holder's record cannot be read is looked at again this soon
HOST_LEASE = "host"  # the lease a run holds on its host; an analyzer's: analyzer-<name>
RELEASE_TRIES = 5  # a release cut by the link is sent again (the next command reconnects)
log = logging.getLogger("subrun.lease")

# HOLD d token bound watch info: take the lock or answer busy (with the holder's record), then
# live while the beat changes or the watch command finds the campaign's work running. Every
# child closes fd 9 so that no child outlives the holder with the lock. The beat's age is
# counted in checks and read with builtins: one `sleep` per check is all the holder starts on
# a host that may be measuring.
HOLD = r"""
d=$0; t=$1; bound=$2; watch=$3; info=$4
answer() {
  { echo "$1"; [ "$1" = held ] || cat "$d/holder" 2>/dev/null; } > "$d/answer.$t.tmp" 9>&-
  mv "$d/answer.$t.tmp" "$d/answer.$t" 9>&-
}
exec 9>>"$d/lock"
flock -n 9 || { answer busy; exit 0; }
printf '%s\n' "$info" > "$d/holder.tmp" && mv "$d/holder.tmp" "$d/holder"
echo $$ > "$d/pid"
touch "$d/beat.$t"
trap 'rm -f "$d/holder" "$d/pid" "$d/beat.$t"; exit 0' TERM INT HUP
answer held
idle=0; last=none
while [ -e "$d/beat.$t" ]; do
  v=; read -r v < "$d/beat.$t" 2> /dev/null
  if [ "$v" != "$last" ]; then last=$v; idle=0; else idle=$((idle + {check})); fi
  if [ "$idle" -gt "$bound" ] && ! sh -c "$watch" > /dev/null 2>&1 9>&-; then break; fi
  sleep {check} 9>&- & wait $!
done
rm -f "$d/holder" "$d/pid" "$d/beat.$t"
""".replace("{check}", str(CHECK_S))

# TAKE d token bound watch info hold: start the holder detached, print its answer
TAKE = r"""
d=$1; t=$2; bound=$3; watch=$4; info=$5; hold=$6
command -v flock > /dev/null 2>&1 || { echo noflock; exit 0; }
mkdir -p "$d" || exit 3
rm -f "$d/answer.$t"
setsid sh -c "$hold" "$d" "$t" "$bound" "$watch" "$info" < /dev/null > /dev/null 2>&1 &
i=0
while [ ! -s "$d/answer.$t" ] && [ $i -lt {tries} ]; do sleep 0.05; i=$((i+1)); done
cat "$d/answer.$t" 2>/dev/null || echo silent
rm -f "$d/answer.$t"
""".replace("{tries}", str(int(ANSWER_S / 0.05)))

RENEW = r"""[ -e "$1/beat.$2" ] && echo "$3" > "$1/beat.$2" && echo ok || echo lost"""

# RELEASE d token: end our holder now (only while the pid is still the holder of d), and
# return once it has let go, so that the host's next run takes the lease at its first try. An
# exited holder has let go of the lock even while it waits to be reaped: the orphan belongs to
# the target's init, which may reap it a second later (`kill -0` still finds a zombie), so a
# zombie counts as gone.
RELEASE = r"""
d=$1; t=$2
[ -e "$d/beat.$t" ] || exit 0
rm -f "$d/beat.$t"
p=$(cat "$d/pid" 2>/dev/null)
[ -n "$p" ] && tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "$t" || exit 0
kill -TERM "$p"
alive() { case $(sed -n 's/^State:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) in
  ''|Z*) return 1;; esac; }
i=0
while alive "$p" && [ $i -lt 100 ]; do sleep 0.02; i=$((i+1)); done
exit 0
"""

# TAKEOVER d: end the holder of d, whoever holds it (the caller has checked it may)
TAKEOVER = r"""
d=$1
p=$(cat "$d/pid" 2>/dev/null)
[ -n "$p" ] && tr '\0' '\n' < "/proc/$p/cmdline" 2>/dev/null | grep -qxF -- "$d" && kill -TERM "$p"
i=0
while [ -e "$d/pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
exit 0
"""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease: a campaign's run, from a controller process."""

    campaign: str
    run: str
    controller: str  # the controller's host name
    pid: int
    started: float  # the controller process's start time: a pid alone may be reused
    since: float = 0.0

    @classmethod
    def here(cls, campaign: str, run: str) -> LeaseHolder:
        """This controller process, holding for campaign's run."""
        pid = os.getpid()
        return cls(campaign, run, socket.gethostname(), pid, psutil.Process(pid).create_time())

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.since).strftime("%H:%M:%S") if self.since else "?"
        run = f", run {self.run}" if self.run else ""
        return (f"campaign '{self.campaign}'{run}, from controller {self.controller} "
                f"(pid {self.pid}), since {since}")

    def process_gone(self) -> bool:
        """Whether the holding controller process is known to have ended: only on this
        machine can that be seen; elsewhere it is not known, and the bound decides."""
        if self.controller != socket.gethostname():
            return False
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) > 0.05
        except psutil.Error:
            return True


@dataclass(frozen=True)
class Lease:
    """A lease taken: renew it while the work goes on, release it after."""

    host: Host
    folder: str
    token: str

    def renew(self, beat: int) -> bool:
        """Write beat number `beat` (each renewal a new one); False when the lease was lost
        (it lapsed during an outage)."""
        result = self.host.run(["sh", "-c", RENEW, "sh", self.folder, self.token, str(beat)],
                               check=False, timeout_s=30)
        return result.stdout.strip() != "lost"

    def release(self) -> None:
        self.host.run(["sh", "-c", RELEASE, "sh", self.folder, self.token],
                      check=False, timeout_s=30)


@dataclass(frozen=True)
class Busy:
    """The lease is held by someone else (holder None when its record is not readable)."""

    holder: LeaseHolder | None


def lease_folder(host: Host, name: str) -> str:
    """Where the lease `name` ("host", "analyzer-<name>") lives on host."""
    if not name or "/" in name:
        raise RunError(f"Lease name {name!r} must be a non-empty single path part.")
    return str(PurePosixPath(host.work_dir) / "leases" / name)


def campaign_work_running(work_dir: str, campaign: str) -> str:
    """A shell command that succeeds while a container or a native process of campaign runs
    on the host (what keeps a lease whose controller stopped renewing it)."""
    label = shlex.quote(f"{LABEL_CAMPAIGN}={campaign}")
    pattern = shlex.quote(f"{work_dir}/detached/subrun-{campaign}-")
    return (f"for d in {pattern}*; do [ -s \"$d/pid\" ] && [ ! -s \"$d/exit\" ] && "
            f"kill -0 \"$(cat \"$d/pid\")\" 2>/dev/null && exit 0; done; "
            f"command -v docker > /dev/null && docker ps -q --filter label={label} | grep -q .")


def try_take(host: Host, name: str, holder: LeaseHolder, bound_s: int = BOUND_S) -> Lease | Busy:
    """Take the lease now, or say who holds it."""
    folder = lease_folder(host, name)
    token = f"{holder.campaign}.{uuid.uuid4().hex[:12]}"
    info = json.dumps({**asdict(holder), "since": time.time()})
    watch = campaign_work_running(host.work_dir, holder.campaign)
    result = host.run(["sh", "-c", TAKE, "sh", folder, token, str(bound_s), watch, info, HOLD],
                      timeout_s=ANSWER_S + 30)
    lines = result.stdout.strip().splitlines()
    answer = lines[0] if lines else "silent"
    if answer == "held":
        return Lease(host, folder, token)
    if answer == "busy":
        return Busy(parse_holder("\n".join(lines[1:])))
    what = {"noflock": "has no `flock` (util-linux, or busybox's)",
            "silent": f"did not answer within {ANSWER_S:.0f} s"}.get(answer, f"said {answer!r}")
    raise RunError(f"On host '{host.name}', the lease {folder} could not be taken: the host "
                   f"{what}. Install util-linux on the host (it holds every run's lease), or "
                   "look at the host's load and try again.")


def take_over(host: Host, name: str) -> None:
    """End the holder of a lease whose controller is known to be gone (see `may_take_over`)."""
    host.run(["sh", "-c", TAKEOVER, "sh", lease_folder(host, name)], check=False, timeout_s=30)


def may_take_over(found: LeaseHolder | None, me: LeaseHolder) -> bool:
    """A lease held for my own campaign by a controller process that has ended (I run that
    campaign again and reattach to its runs, so waiting out the bound would only cost time),
    or by this very process for this campaign: a link cut took away the answer of a take, or
    the release of an earlier run (a process runs a campaign's runs on a host one at a time)."""
    if found is None or found.campaign != me.campaign:
        return False
    mine = (found.controller, found.pid, found.started) == (me.controller, me.pid, me.started)
    return mine or found.process_gone()


def parse_holder(text: str) -> LeaseHolder | None:
    """The holder a lease's record names; None when it cannot be read (being written)."""
    try:
        return LeaseHolder(**json.loads(text))
    except (ValueError, TypeError):
        return None


@contextmanager
def leased(host: Host, name: str, holder: LeaseHolder, on_wait: Callable[[str], None],
           cancelled: threading.Event | None = None, bound_s: int = BOUND_S) -> Iterator[Lease]:
    """Hold the lease `name` on host for the block, waiting as long as it takes; on_wait hears
    who holds it, again whenever the holder changes. A cancel while waiting raises
    RunCancelled; a link cut while taking is the caller's (its outage budget)."""
    lease = _wait_for(host, name, holder, on_wait, cancelled, bound_s)
    stop = threading.Event()
    renewer = threading.Thread(target=_renew, args=(lease, stop), daemon=True,
                               name=f"subrun-lease-{host.name}-{name}")
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join(timeout=30)
        _release(lease, name)


def _release(lease: Lease, name: str) -> None:
    """Release through a few link cuts (releasing twice is harmless); a lease that cannot be
    released lapses by itself after BOUND_S."""
    try:
        through_cuts(lease.release, RELEASE_TRIES)
    except SubrunError as e:  # cut every time, the host given up, a link down
        log.warning("host '%s': could not release lease %s (%s); it lapses within %d s.",
                    lease.host.name, name, e, BOUND_S)


def _wait_for(host: Host, name: str, holder: LeaseHolder, on_wait: Callable[[str], None],
              cancelled: threading.Event | None, bound_s: int) -> Lease:
    told: object = ()  # nobody named yet
    looked_again = False  # at a lease whose record could not be read
    while True:
        if cancelled is not None and cancelled.is_set():
            raise RunCancelled(f"{holder.run or holder.campaign}: cancelled while waiting for "
                               f"host '{host.name}'; it runs when the campaign starts again.")
        try:
            taken = try_take(host, name, holder, bound_s)
        except ConnectionLost as e:  # the next command reconnects, within the outage budget
            log.warning("host '%s': %s Taking the lease again.", host.name, e)
            continue
        if isinstance(taken, Lease):
            return taken
        if may_take_over(taken.holder, holder):
            assert taken.holder is not None
            log.info("host '%s': lease %s of %s taken over (its controller has ended)",
                     host.name, name, taken.holder.describe())
            take_over(host, name)
            continue
        if taken.holder is None and not looked_again:
            # its record is being written (a holder just took the lease) or removed (one
            # letting go): look again in a moment rather than say "another controller"
            looked_again = True
            (cancelled or threading.Event()).wait(RECORD_S)
            continue
        looked_again = False
        if taken.holder != told:
            who = taken.holder.describe() if taken.holder else "another controller"
            on_wait(f"waiting: host '{host.name}' ({name} lease) is held by {who}")
            told = taken.holder
        (cancelled or threading.Event()).wait(POLL_S)


def _renew(lease: Lease, stop: threading.Event) -> None:
    """Write a new beat every RENEW_S; a cut link is tried again (the holder keeps the lease
    while the run's work runs, and for BOUND_S after the last beat)."""
    beat = 0
    while not stop.wait(RENEW_S):
        beat += 1
        try:
            if not lease.renew(beat):
                log.warning("host '%s': the lease %s lapsed (no beat for %d s and nothing of "
                            "the campaign running); another campaign may take the host.",
                            lease.host.name, lease.folder, BOUND_S)
                return
        except SubrunError as e:  # a cut, a link down: tried again at the next beat
            log.debug("host '%s': lease not renewed this time: %s", lease.host.name, e)
