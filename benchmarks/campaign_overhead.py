"""Campaign overhead on the test lab: wall time of a 2-host short campaign over the busiest
host's summed LoadGen run time (budget: at most 1.05).

    .venv/bin/python benchmarks/campaign_overhead.py [--hosts h2 h3] [--seconds 20]
        [--no-accuracy] [--work-dir DIR]

Runs `subrun run CAMPAIGN.yaml` as a person does (ephemeral Prefect API, in a PREFECT_HOME of
its own under the work directory). First a small warm-up campaign: images provisioned, Prefect's
database created, and each host's Offline throughput measured. Then a fresh campaign (a new
name, so nothing is reused) is timed from process start to exit: Offline and SingleStream,
performance runs of at least --seconds each (Offline's target QPS is set from the warm-up
throughput so the run stays VALID), plus their accuracy runs (the whole 50,000-sample dataset).

LoadGen's own time of a run is the span of its detail log's MLLOG timestamps. Each run is cut
into segments (see SEGMENTS) by the run record's times, LoadGen's power_end stamp and the Docker
engine's create/start/die/destroy events of its container. The breakdown follows the host whose
last run ends last: the phases before its first run (from the Prefect log lines), its runs'
segments, the hand-offs between runs, and what follows the last run. Times inside a run come from
the target's clock; on the lab that is the controller's clock.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.campaign import load_campaign  # noqa: E402
from bench.loadgen_log import DetailLog, locate_logs, read_detail  # noqa: E402
from bench.run import RunRecord  # noqa: E402
from bench.store import RunStore  # noqa: E402
from bench.submitted import passed  # noqa: E402
from lab.config import load_inventory  # noqa: E402
from lab.docker import LABEL_CAMPAIGN, Engine  # noqa: E402
from lab.transport import open_host  # noqa: E402

LAB = Path(os.environ.get("SUBRUN_LAB_DIR", ROOT / ".lab"))
BUDGET = 1.05
QPS_HEADROOM = 1.6  # Offline target QPS over the warm-up throughput: the run outlasts min_duration
LOG_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) \| \w+\s*\| (.*)$")
PHASES = [  # (label, pattern of the Prefect log line that ends the phase; a phase whose line
    # is missing is counted in the next one: Prefect logs its own temporary server's start, not
    # the one `subrun run` boots beside its start-up, flows.private_api)
    ("CLI start-up: imports, campaign load", r"^prefect - Starting temporary server"),
    ("CLI start-up and the temporary Prefect API (side by side)",
     r"^Flow run '[^']+' - Beginning flow run"),
    ("pre-flight (LoadGen round, hosts reachable)", r"^Task run 'pre-flight-\w+' - Finished"),
    ("provision (images unchanged)", r"^Task run 'provision-\w+' - Finished"),
    ("describe (system descriptions)", r"^Task run 'describe-\w+' - Finished"),
]


SEGMENTS = [  # (column, description): consecutive parts of one run, opened to recorded
    ("prepare", "run dir, user.conf, container lookup, `docker run` (controller over SSH)"),
    ("start", "the engine creates and starts the container"),
    ("harness", "harness start-up until LoadGen starts (imports, model, QSL)"),
    ("LoadGen", "LoadGen's own run time"),
    ("exit", "LoadGen's end until the container exits (logs, teardown, accuracy scoring)"),
    ("collect", "the exit seen (`docker wait`), files fetched and stored, container removed"),
    ("record", "run dir removed, verdict, run record written"),
]


@dataclass(frozen=True)
class Attempt:
    """One attempt of the timed campaign: its segments' boundaries in seconds since start."""

    label: str
    host: str
    marks: tuple[float, ...]  # opened, created, started, LoadGen start, end, died, removed, done
    passed: bool

    @property
    def segments(self) -> list[float]:
        return [b - a for a, b in zip(self.marks, self.marks[1:], strict=False)]

    @property
    def loadgen_s(self) -> float:
        return self.marks[4] - self.marks[3]

    @property
    def started_s(self) -> float:
        return self.marks[0]

    @property
    def finished_s(self) -> float:
        return self.marks[-1]


def write_campaign(folder: Path, name: str, hosts: list[str], *, accuracy: bool,
                   settings: dict[str, dict[str, dict[str, float]]]) -> Path:
    """A short-mode digits campaign on hosts (settings per host, then per scenario)."""
    campaign = {
        "name": name, "inventory": str(LAB / "hosts.yaml"), "round": "v6.1",
        "division": "open", "mode": "short", "accuracy": accuracy, "compliance": False,
        "power": False, "output_dir": str(folder / "out"),
        "hosts": [{"host": h, "benchmarks": [{"benchmark": "digits",
                                              "scenarios": list(settings[h]),
                                              "settings": settings[h]}]} for h in hosts],
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return path


def subrun_run(campaign: Path, prefect_home: Path, log: Path) -> tuple[float, float]:
    """Run `subrun run campaign` to its end; (start time since the epoch, wall seconds)."""
    env = {**os.environ, "PREFECT_HOME": str(prefect_home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "200"}
    started, t0 = time.time(), time.monotonic()
    with log.open("w") as out:
        code = subprocess.run([str(ROOT / ".venv" / "bin" / "subrun"), "run", str(campaign)],
                              stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
    wall_s = time.monotonic() - t0
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        sys.exit(f"`subrun run {campaign}` exited with status {code}; its output ends:\n{tail}")
    return started, wall_s


def loadgen_window(detail: DetailLog) -> tuple[datetime, float]:
    """When LoadGen started (UTC) and how long it ran, from the detail log's own stamps."""
    stamps = [e.time_ms for e in detail.entries if e.time_ms is not None]
    span_s = (max(stamps) - min(stamps)) / 1000
    end = next(e for e in detail.entries if e.key == "power_end")
    stamped = datetime.strptime(str(end.value), "%m-%d-%Y %H:%M:%S.%f").replace(tzinfo=UTC)
    start = stamped - timedelta(milliseconds=end.time_ms or 0)
    declared = datetime.strptime(str(detail.get("test_datetime")), "%Y-%m-%dT%H:%M:%SZ")
    skew_h = round((start - declared.replace(tzinfo=UTC)).total_seconds() / 3600)
    return start - timedelta(hours=skew_h), span_s  # a target whose clock is not UTC


def attempts(store: RunStore, campaign: str, started: float,
             containers: dict[str, dict[str, float]]) -> list[Attempt]:
    """Every attempt in the store that ran LoadGen, its times relative to the process start
    (its container found by the name the campaign gave it, `subrun-<campaign>-<key>-a<n>`)."""
    origin = datetime.fromtimestamp(started, UTC)
    found = []
    keys = store.keys()
    for key in keys:
        for record in store.attempts(key):
            detail = locate_logs(store.path(key, record.attempt)) / "mlperf_log_detail.txt"
            if detail.is_file():
                found.append(_attempt(record, read_detail(detail), origin, started,
                                      containers.get(f"subrun-{record.id.name(campaign)}",
                                                     {})))
    return sorted(found, key=lambda a: a.started_s)


def _attempt(record: RunRecord, detail: DetailLog, origin: datetime, started: float,
             events: dict[str, float]) -> Attempt:
    loadgen_start, loadgen_s = loadgen_window(detail)
    opened = (record.started_at - origin).total_seconds()
    begin = (loadgen_start - origin).total_seconds()
    done = ((record.finished_at or record.started_at) - origin).total_seconds()
    at = {action: t - started for action, t in events.items()}  # none for a native run
    marks = (opened, at.get("create", opened), at.get("start", opened), begin,
             begin + loadgen_s, at.get("die", done), at.get("destroy", done), done)
    return Attempt(record.spec.label, record.spec.host, marks, passed(record))


def container_events(hosts: list[str], campaign: str, started: float, ended: float
                     ) -> dict[str, dict[str, float]]:
    """When each of the campaign's containers was created, started, died and removed (seconds
    since the epoch), from each host's Docker engine events."""
    inventory = load_inventory(LAB / "hosts.yaml")
    found: dict[str, dict[str, float]] = {}
    for name in hosts:
        config = inventory.host(name)
        if not config.docker.engine:
            continue
        engine = Engine(open_host(config), config.docker)
        listed = engine.docker(["events", "--since", str(int(started) - 1), "--until",
                                str(int(ended) + 1), "--filter", f"label={LABEL_CAMPAIGN}="
                                f"{campaign}", "--format", "{{json .}}"], what="events")
        for line in listed.stdout.splitlines():
            event = json.loads(line)
            container = event["Actor"]["Attributes"].get("name", "")
            found.setdefault(container, {})[event["Action"]] = event["timeNano"] / 1e9
        engine.host.close()
    return found


def log_events(log: Path, started: float) -> list[tuple[float, str]]:
    """Prefect's console log lines as (seconds since the process start, message)."""
    origin = datetime.fromtimestamp(started).astimezone()
    events = []
    for line in log.read_text(errors="replace").splitlines():
        if m := LOG_LINE.match(line):
            h, mi, s, ms = (int(g) for g in m.groups()[:4])
            at = origin.replace(hour=h, minute=mi, second=s, microsecond=ms * 1000)
            if at < origin - timedelta(seconds=5):
                at += timedelta(days=1)  # the campaign crossed midnight
            events.append(((at - origin).total_seconds(), m.group(5)))
    return events


def last_event(events: list[tuple[float, str]], pattern: str) -> float | None:
    hits = [at for at, message in events if re.search(pattern, message)]
    return max(hits) if hits else None


def print_hosts(runs: list[Attempt], wall_s: float) -> dict[str, float]:
    """The table per host; returns each host's summed LoadGen seconds."""
    summed: dict[str, float] = {}
    print(f"\n{'host':<6} {'runs':>5} {'LoadGen s':>10} {'wall s':>8}")
    for host in sorted({r.host for r in runs}):
        mine = [r for r in runs if r.host == host]
        summed[host] = sum(r.loadgen_s for r in mine)
        print(f"{host:<6} {len(mine):>5} {summed[host]:>10.1f} "
              f"{max(r.finished_s for r in mine) - min(r.started_s for r in mine):>8.1f}")
    print(f"{'all':<6} {len(runs):>5} {'':>10} {wall_s:>8.1f}   (campaign, `subrun run` "
          "start to exit)")
    return summed


def print_runs(runs: list[Attempt]) -> None:
    """Each run's segments, in seconds."""
    print(f"\n{'run':<36}" + "".join(f"{name:>9}" for name, _ in SEGMENTS) + f"{'passed':>8}")
    for r in runs:
        print(f"{r.label:<36}" + "".join(f"{s:>9.2f}" for s in r.segments) + f"{r.passed!s:>8}")
    for name, description in SEGMENTS:
        print(f"  {name:<8} {description}")


def print_breakdown(runs: list[Attempt], events: list[tuple[float, str]],
                    wall_s: float) -> None:
    """Where the wall time went, along the host whose last run ends last."""
    critical = max({r.host for r in runs},
                   key=lambda h: max(r.finished_s for r in runs if r.host == h))
    mine = [r for r in runs if r.host == critical]
    rows: list[tuple[str, float]] = []
    at = 0.0
    for label, pattern in PHASES:
        end = last_event(events, pattern)
        if end is not None and end >= at:
            rows.append((label, end - at))
            at = end
    rows.append((f"{critical}: hand-offs before and between its {len(mine)} runs",
                 sum(r.started_s for r in mine) - sum(r.finished_s for r in mine[:-1]) - at))
    for i, (name, _) in enumerate(SEGMENTS):
        rows.append((f"{critical}: {name} (summed over its runs)",
                     sum(r.segments[i] for r in mine)))
    flow_end = last_event(events, r"^Flow run '[^']+' - Finished in state")
    after_runs = mine[-1].finished_s
    if flow_end is not None and flow_end > after_runs:
        rows.append(("assemble, prechecks, package, report", flow_end - after_runs))
        after_runs = flow_end
    rows.append(("Prefect API stop, process exit", wall_s - after_runs))
    print(f"\nwhere the {wall_s:.1f} s went (critical path: host {critical})")
    for label, seconds in rows:
        print(f"  {label:<48} {seconds:>7.2f} s {100 * seconds / wall_s:>5.1f} %")


def offline_rates(store: RunStore) -> dict[str, float]:
    """Offline samples per second each host reached in the warm-up campaign."""
    rates = {}
    for record in store.runs():
        detail = read_detail(locate_logs(store.path(record.key, record.attempt))
                             / "mlperf_log_detail.txt")
        rates[record.spec.host] = float(detail.get("result_samples_per_second", 0) or 0)
    return rates


def timed_settings(hosts: list[str], seconds: float, rates: dict[str, float]
                   ) -> dict[str, dict[str, dict[str, float]]]:
    """Per host: Offline and SingleStream runs of at least `seconds` each, VALID by design."""
    duration_ms = int(seconds * 1000)
    return {h: {"Offline": {"min_duration": duration_ms,
                            "target_qps": round(max(rates.get(h, 0), 100) * QPS_HEADROOM)},
                "SingleStream": {"min_duration": duration_ms}} for h in hosts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", nargs="+", default=["h2", "h3"])
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="min_duration of each performance run (default 20 s)")
    parser.add_argument("--no-accuracy", dest="accuracy", action="store_false",
                        help="performance runs only")
    parser.add_argument("--work-dir", type=Path, help="keep campaigns, stores and logs here")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="subrun-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    prefect_home = work / "prefect"

    warm = write_campaign(work, f"overhead-warmup-{stamp}", args.hosts, accuracy=False,
                          settings={h: {"Offline": {}} for h in args.hosts})
    print(f"warm-up campaign {warm.name} (provision, Prefect database, Offline throughput) ...",
          flush=True)
    _, warm_s = subrun_run(warm, prefect_home, work / "warmup.log")
    rates = offline_rates(RunStore(load_campaign(warm).paths.store))
    print(f"  {warm_s:.1f} s; Offline samples/s: "
          + ", ".join(f"{h} {r:.0f}" for h, r in sorted(rates.items())))

    timed = write_campaign(work, f"overhead-{stamp}", args.hosts, accuracy=args.accuracy,
                           settings=timed_settings(args.hosts, args.seconds, rates))
    print(f"timed campaign {timed.name}: Offline + SingleStream, performance runs of at least "
          f"{args.seconds:g} s{', with accuracy runs' if args.accuracy else ''} ...", flush=True)
    started, wall_s = subrun_run(timed, prefect_home, work / "timed.log")
    containers = container_events(args.hosts, timed.stem, started, started + wall_s)
    runs = attempts(RunStore(load_campaign(timed).paths.store), timed.stem, started,
                    containers)
    summed = print_hosts(runs, wall_s)
    print_runs(runs)
    print_breakdown(runs, log_events(work / "timed.log", started), wall_s)
    busiest = max(summed, key=lambda h: summed[h])
    ratio = wall_s / summed[busiest]
    print(f"\ncampaign overhead: {wall_s:.1f} s wall / {summed[busiest]:.1f} s LoadGen on "
          f"{busiest} (busiest) = {ratio:.3f}  (budget <= {BUDGET})  "
          f"{'OK' if ratio <= BUDGET else 'OVER BUDGET'}")
    mine = [r for r in runs if r.host == busiest]
    per_run_s = sum(r.finished_s - r.started_s - r.loadgen_s for r in mine) / len(mine)
    fixed_s = wall_s - sum(r.finished_s - r.started_s for r in mine)
    needed_s = (fixed_s / len(mine) + per_run_s) / (BUDGET - 1)
    print(f"overhead on {busiest}: {fixed_s:.1f} s per campaign (before, between and after its "
          f"runs) + {per_run_s:.1f} s per run; at these costs the budget holds once each of "
          f"{len(mine)} runs lasts >= {needed_s:.0f} s of LoadGen")
    if not all(r.passed for r in runs):
        print("note: some attempts did not pass; see the run table.")
    print(f"campaign files, stores and logs: {work}")


if __name__ == "__main__":
    main()
