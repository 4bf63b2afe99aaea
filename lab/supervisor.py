"""The shell side of detached processes: a wrapper that supervises the command on the target,
and the scripts that start it, ask how it is, and signal it.

The wrapper runs the command in its own session so that neither a closed SSH channel nor a
SIGHUP reaches it, records its pid first and its exit status last (atomically, via rename), and
forwards TERM/INT/HUP to the command, staying alive to record how it ended.

A recorded pid outlives its process: after a crash or a reboot the number may belong to an
unrelated process, and `kill` by number would stop someone else's work. So before a pid counts
as running, or is signalled, the process there must still be this folder's wrapper: its command
line holds the state folder, and its start time (from /proc, recorded by the wrapper itself)
matches. On a system without /proc, `ps` gives the command line.
"""

from __future__ import annotations

from typing import Literal

Reach = Literal["wrapper", "group", "children"]

WRAPPER = r"""
d=$0
sed 's/.*) //' "/proc/$$/stat" 2>/dev/null | cut -d' ' -f20 > "$d/start.tmp"
mv "$d/start.tmp" "$d/start"
echo $$ > "$d/pid.tmp" && mv "$d/pid.tmp" "$d/pid"
"$@" > "$d/out.log" 2>&1 < /dev/null &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
wait $child; rc=$?
while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
echo $rc > "$d/exit.tmp" && mv "$d/exit.tmp" "$d/exit"
"""

START = r"""
d=$1; w=$2; shift 2
mkdir -p "$d" && rm -f "$d/exit" "$d/pid" "$d/start"
setsid sh -c "$w" "$d" "$@" < /dev/null > /dev/null 2>&1 &
i=0
while [ ! -s "$d/pid" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
cat "$d/pid"
"""

# ours PID: the process with that pid is the wrapper of folder $d (not whoever got the pid since)
_OURS = r"""
ours() {
  if [ -r "/proc/$1/cmdline" ]; then
    tr '\0' '\n' < "/proc/$1/cmdline" | grep -qxF -- "$d" || return 1
    [ ! -s "$d/start" ] || \
      [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20)" = "$(cat "$d/start")" ]
  else
    kill -0 "$1" 2>/dev/null && ps -o args= -p "$1" 2>/dev/null | grep -qF -- "$d"
  fi
}
"""

STATUS = _OURS + r"""
d=$1
if [ -s "$d/exit" ]; then echo "exit $(cat "$d/exit")"; exit 0; fi
if [ ! -s "$d/pid" ]; then echo missing; exit 0; fi
if ours "$(cat "$d/pid")"; then echo running; else
  sleep 0.2; if [ -s "$d/exit" ]; then echo "exit $(cat "$d/exit")"; else echo lost; fi
fi
"""

# SIGNAL d pid sig reach: signal the wrapper, its process group, or its children; only while
# the pid is still the wrapper of d. Prints "gone" when it is not.
SIGNAL = _OURS + r"""
d=$1; p=$2; sig=$3; reach=$4
ours "$p" || { echo gone; exit 0; }
case $reach in
  group) kill -"$sig" -"$p" 2>/dev/null || kill -"$sig" "$p" ;;
  children) for c in $(ps -o pid= --ppid "$p"); do kill -"$sig" "$c" 2>/dev/null; done ;;
  *) kill -"$sig" "$p" ;;
esac
echo signalled
"""

# END d ticks remove: end the process of folder d in one round trip: TERM to its wrapper (while
# the pid is still the wrapper of d), up to `ticks` waits of 0.05 s for it to record its exit,
# then KILL to its whole group if it is still there; remove d when remove is "yes". Prints
# "none" when d records no process, "ended" otherwise.
END = _OURS + r"""
d=$1; ticks=$2; remove=$3
p=$(cat "$d/pid" 2>/dev/null)
case $p in
  ''|*[!0-9]*) [ "$remove" = yes ] && rm -rf "$d"; echo none; exit 0 ;;
esac
if ours "$p"; then
  kill -TERM "$p" 2>/dev/null
  i=0
  while [ ! -s "$d/exit" ] && ours "$p" && [ $i -lt "$ticks" ]; do sleep 0.05; i=$((i+1)); done
  ! ours "$p" || kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
fi
[ "$remove" = yes ] && rm -rf "$d"
echo ended
"""
