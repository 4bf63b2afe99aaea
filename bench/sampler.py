"""The telemetry sampler: a POSIX sh loop on the target host, beside a run, outside its container.

Once a second it reads /proc and /sys with shell builtins only (no Python on the target, one
`sleep` per sample; `nvidia-smi` or `rocm-smi` only where they exist) and appends one JSON line
of raw counters: CPU time in total and per core (/proc/stat), cpufreq where present, load
average, MemTotal/MemAvailable, thermal zone and hwmon temperatures, the GPUs, and the CPU time
of the run itself: its container's cgroup (cgroup v2 `cpu.stat` usage_usec, or v1
`cpuacct.usage`), or for a native run the processes of the run's session. Its first line names
the run's own cores (those it may run on). Deltas, shares and flags are computed on the
controller (`bench.trace`), so the loop stays cheap; its own CPU time is its last line.

It runs as a detached process (`Host.start_detached`) named `subrun-telemetry-<run id>`, so it
outlives a dropped link, is found again on reattachment, and ends by itself when the run's
process ends. The trace lives in the sampler's own state folder, never in the run directory: a
container may write into its run directory, and could turn the trace's name into a symlink that
a sampler running on the host would follow. The controller copies the trace beside the run's
collected files (`Host.get` refuses a symlink), under `TRACE`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lab.cuts import through_cuts
from lab.errors import SubrunError, TransferFailed
from lab.host import Host

log = logging.getLogger("subrun.telemetry")
TRACE = "telemetry.jsonl"  # its name among an attempt's stored files
TRACE_MAX_BYTES = 16 * 1024 * 1024  # about 8 days of samples on a 64-core host: far beyond a run
MAX_SAMPLE_S = 7 * 24 * 3600  # a sampler whose run never ends stops itself after a week
STOP_WAIT_S = 3.0  # a stopped sampler writes its last line at once, mid-sleep or not

# sh -c SCRIPT sh OUT PID MODE MAX OWN: MODE cgroup (PID's cgroup is the run's) or session (the
# processes of PID's session are the run's); OWN the run's cores as configured, else those PID
# may run on (its Cpus_allowed_list). Every number printed is a raw counter or reading.
SCRIPT = r"""
out=$1; pid=$2; mode=$3; left=$4; own=$5; stop=0
trap 'stop=1' TERM INT HUP
clean() { printf '%s' "$1" | tr -cd 'A-Za-z0-9_. :/-' | cut -c1-60; }
cg=; unit=
if [ "$mode" = cgroup ] && [ -r "/proc/$pid/cgroup" ]; then
  while IFS=: read -r _ ctl path; do
    case $ctl in
      '') for f in "/sys/fs/cgroup$path/cpu.stat" "/sys/fs/cgroup/unified$path/cpu.stat"; do
            if [ -z "$cg" ] && [ -r "$f" ] && grep -q '^usage_usec ' "$f"; then
              cg=$f; unit=us; fi
          done ;;
      *cpuacct*) f="/sys/fs/cgroup/$ctl$path/cpuacct.usage"; [ -r "$f" ] && v1=$f ;;
    esac
  done < "/proc/$pid/cgroup"
  if [ -z "$cg" ] && [ -n "$v1" ]; then cg=$v1; unit=ns; fi
fi
[ "$mode" = session ] && unit=ticks
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
[ -z "$own" ] && own=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status" \
  2>/dev/null)
own=$(printf '%s' "$own" | tr -cd '0-9,-' | cut -c1-4000)
maxk=; for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq; do
  [ -r "$f" ] && read -r v < "$f" && maxk="$maxk${maxk:+,}$v"; done
freqs=; for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq; do
  [ -r "$f" ] && freqs="$freqs $f"; done
temps=; names=; limits=
for z in /sys/class/thermal/thermal_zone*; do
  [ -r "$z/temp" ] || continue
  read -r t < "$z/type" 2>/dev/null || t=zone
  lim=0
  for tp in "$z"/trip_point_*_type; do
    [ -r "$tp" ] || continue; read -r ty < "$tp"
    case $ty in passive|hot|critical)
      read -r v < "${tp%_type}_temp" 2>/dev/null || continue
      if [ "$v" -gt 0 ] 2>/dev/null && { [ "$lim" -eq 0 ] || [ "$v" -lt "$lim" ]; }; then
        lim=$v; fi ;;
    esac
  done
  temps="$temps $z/temp"; names="$names${names:+,}\"$(clean "${z##*/}/$t")\""
  limits="$limits${limits:+,}$lim"
done
for f in /sys/class/hwmon/hwmon*/temp*_input; do
  [ -r "$f" ] || continue
  d=${f%/*}; b=${f%_input}; read -r n < "$d/name" 2>/dev/null || n=hwmon
  l=${b##*/}; [ -r "${b}_label" ] && read -r l < "${b}_label"
  lim=0; for x in "${b}_max" "${b}_crit"; do
    if [ "$lim" -eq 0 ] && [ -r "$x" ]; then read -r lim < "$x" || lim=0; fi; done
  temps="$temps $f"; names="$names${names:+,}\"$(clean "$n/$l")\""
  limits="$limits${limits:+,}${lim:-0}"
done
gpu=; command -v nvidia-smi >/dev/null 2>&1 && gpu=nvidia
[ -z "$gpu" ] && command -v rocm-smi >/dev/null 2>&1 && gpu=rocm
read -r up _ < /proc/uptime
printf '{"v":1,"epoch":%s,"up":%s,"hz":%s,"run_unit":"%s","gpu":"%s","own":"%s",%s\n' \
  "$(date +%s)" "$up" "${hz:-100}" "$unit" "$gpu" "$own" \
  "\"max_khz\":[$maxk],\"temps\":[$names],\"limits_mc\":[$limits]}" >> "$out"
fmt='{"up":%s,"cpu":[%s],"cores":[%s],"ids":[%s],"khz":[%s],"temp_mc":[%s],"load":[%s,%s,%s],'
fmt=$fmt'"mem_kb":[%s,%s],"run":%s,"gpu":[%s]}\n'
while :; do
  read -r up _ < /proc/uptime
  cpu=; cores=; ids=
  while read -r n a b c d e f g h _; do
    case $n in
      cpu) cpu="$a,$b,$c,$d,${e:-0},${f:-0},${g:-0},${h:-0}" ;;
      cpu[0-9]*) cores="$cores${cores:+,}[$a,$b,$c,$d,${e:-0},${f:-0},${g:-0},${h:-0}]"
                 ids="$ids${ids:+,}${n#cpu}" ;;
      *) break ;;
    esac
  done < /proc/stat
  khz=; for f in $freqs; do read -r v < "$f" 2>/dev/null && khz="$khz${khz:+,}$v"; done
  tc=; for f in $temps; do v=0; read -r v < "$f" 2>/dev/null; tc="$tc${tc:+,}${v:-0}"; done
  read -r l1 l5 l15 _ < /proc/loadavg
  mt=0; ma=0
  while read -r k v _; do
    case $k in MemTotal:) mt=$v ;; MemAvailable:) ma=$v; break ;; esac
  done < /proc/meminfo
  run=null
  if [ "$unit" = us ]; then
    while read -r k v; do [ "$k" = usage_usec ] && { run=$v; break; }; done < "$cg" 2>/dev/null
  elif [ "$unit" = ns ]; then read -r run < "$cg" 2>/dev/null || run=null
  elif [ "$unit" = ticks ]; then
    run=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v s="$pid" \
      '{sub(/^.*\) /, ""); if ($4 == s) t += $12 + $13 + $14 + $15} END {print t + 0}')
  fi
  g=
  if [ "$gpu" = nvidia ]; then
    g=$(nvidia-smi --query-gpu=utilization.gpu,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
        --format=csv,noheader,nounits 2>/dev/null | tr -d '"\\' | sed 's/.*/"&"/' | paste -sd, -)
  elif [ "$gpu" = rocm ]; then
    g=$(rocm-smi --showuse --showtemp --showpower --showclocks --csv 2>/dev/null \
        | tr -d '"\\' | sed 's/.*/"&"/' | paste -sd, -)
  fi
  printf "$fmt" "$up" "$cpu" "$cores" "$ids" "$khz" "$tc" "$l1" "$l5" "$l15" "$mt" "$ma" \
    "${run:-null}" "$g" >> "$out"  # one write per line
  left=$((left - 1))
  if [ $stop = 1 ] || [ $left -le 0 ] || [ ! -d "/proc/$pid" ]; then break; fi
  # a trapped signal ends a wait at once, where a sleep in front would hold it; the nap left
  # then ends by itself within the second (killing it could hit a reused pid once it is reaped)
  sleep 1 &
  wait $!
  [ $stop = 1 ] && continue
done
read -r s < "/proc/$$/stat"; set -- ${s##*") "}
read -r up _ < /proc/uptime
printf '{"up":%s,"self_ticks":%s}\n' "$up" "$((${12} + ${13} + ${14} + ${15}))" >> "$out"
"""


def process_name(rid: str) -> str:
    """The detached process name of a run's sampler."""
    return f"subrun-telemetry-{rid}"


def trace_path(host: Host, rid: str) -> str:
    """Where the sampler of run id rid writes its trace on the host (its own state folder)."""
    return f"{host.detached_dir(process_name(rid))}/{TRACE}"


def ensure(host: Host, rid: str, pid: int, mode: str, own: str = "") -> None:
    """Start the sampler of rid beside the run's process pid, unless one still runs (a
    reattached run keeps its sampler; a new one appends to the same trace). own is the run's
    core list when pid itself is not pinned (a native run's supervisor); else pid's own."""
    found = host.find_detached(process_name(rid))
    if found is not None and host.poll_detached(found).running:
        return
    host.start_detached(["sh", "-c", SCRIPT, "sh", trace_path(host, rid), str(pid), mode,
                         str(MAX_SAMPLE_S), own], name=process_name(rid))


def fetch(host: Host, rid: str, local_dir: Path) -> bool:
    """Stop rid's sampler (it writes its last line) and copy its trace to local_dir/TRACE;
    False when there is none. A file of that name the run left itself is dropped: the name
    is the sampler's."""
    local = Path(local_dir) / TRACE
    if local.is_symlink() or local.exists():  # never taken for a trace
        log.warning("host '%s', run %s: the run wrote a file named %s itself; it is not kept",
                    host.name, rid, TRACE)
        local.unlink()
    if not host.end_detached(process_name(rid), wait_s=STOP_WAIT_S):
        return False
    try:
        host.get(trace_path(host, rid), local, max_bytes=TRACE_MAX_BYTES)
    except TransferFailed as e:  # none written, or not a plain file: the run has no trace
        log.warning("host '%s', run %s: telemetry trace not collected: %s", host.name, rid, e)
        return False
    return True


REMOVE_TRIES = 3  # a removal cut by the link is done again (the next command reconnects)


def remove(host: Host, rid: str) -> None:
    """Stop rid's sampler if it still runs and remove its state folder (after collection),
    through a few link cuts: a folder left behind would show in `subrun status`."""
    try:
        through_cuts(lambda: _remove(host, rid), REMOVE_TRIES)
    except SubrunError as e:  # a leftover sampler ends by itself with its run
        log.warning("host '%s', run %s: telemetry sampler not removed: %s", host.name, rid, e)


def _remove(host: Host, rid: str) -> None:
    host.end_detached(process_name(rid), wait_s=0, remove=True)
