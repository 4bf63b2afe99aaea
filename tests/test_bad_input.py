"""Bad input never gives a traceback or a hang: hundreds of mutated hosts.yaml and campaign files,
each run through `subrun plan`, end in exit 0 (a valid file) or exit 2 with one paragraph naming
what is wrong, within 2 s and 200 MB each; the worst of them also through the real console script.
"""

from __future__ import annotations

import contextlib
import io
import re
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import psutil
import pytest

from bench.campaign import load_campaign
from flows.cli import main
from lab.config import load_inventory
from tests.support.mutants import CAMPAIGN, HOSTS, Mutant, mutants

BIN = Path(sys.executable).parent
README = Path(__file__).resolve().parents[1] / "README.md"
WALL_S = 2.0
GROWTH_MB = 200
MIN_MUTANTS = 300


class Hung(BaseException):
    """Raised by the alarm in a mutant that runs far past its budget."""


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise Hung after seconds; pytest-timeout's own timer (the same one) is put back after."""
    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    start = time.monotonic()
    outer_s, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        left_s = max(outer_s - (time.monotonic() - start), 0.001) if outer_s else 0
        signal.signal(signal.SIGALRM, previous)
        signal.setitimer(signal.ITIMER_REAL, left_s)


@contextlib.contextmanager
def memory_cap(extra_bytes: int) -> Iterator[None]:
    """Cap this process's address space at its size now plus extra_bytes: a mutant that would
    eat the machine's memory (as /dev/zero read whole once did) raises MemoryError instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (psutil.Process().memory_info().vms + extra_bytes,
                                            hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def plan_in_process(folder: Path, mutant: Mutant) -> tuple[object, str, str, float]:
    """`subrun plan` on the mutant, in this process: exit code, stdout, stderr, wall seconds."""
    (folder / "hosts.yaml").write_bytes(mutant.hosts)
    (folder / "c.yaml").write_bytes(mutant.campaign)
    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["subrun", "plan", str(folder / "c.yaml")]
    code: object = None
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), alarm(20):
            main()
    except SystemExit as e:
        code = e.code
    except (Exception, Hung) as e:  # the test reports it; a crash is what it looks for
        code = f"{type(e).__name__}: {e}"
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue(), time.monotonic() - start


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_every_mutant_is_accepted_or_refused_in_one_paragraph(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    all_mutants = list(mutants())
    assert len(all_mutants) >= MIN_MUTANTS
    (tmp_path / "base").mkdir()  # the unmutated pair is valid; it also pays the lazy imports
    code, out, err, _ = plan_in_process(tmp_path / "base", Mutant("", "", HOSTS.encode(),
                                                                  CAMPAIGN.encode()))
    assert code == 0 and "Campaign 'mutant-demo'" in out, err
    baseline_mb = peak_rss_mb()
    counts: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []
    slowest = (0.0, "")
    for i, mutant in enumerate(all_mutants):
        folder = tmp_path / str(i)
        folder.mkdir()
        with memory_cap(1024**3):
            code, out, err, wall_s = plan_in_process(folder, mutant)
        slowest = max(slowest, (wall_s, mutant.name))
        growth_mb = peak_rss_mb() - baseline_mb
        message = err.strip()
        verdict = {0: "accepted", 2: "refused"}.get(code)  # type: ignore[call-overload]
        problems = []
        if verdict is None:
            problems.append(f"exit {code!r}")
        if verdict == "accepted" and "Campaign '" not in out:
            problems.append("exit 0 without a plan")
        if verdict == "refused" and (not message.startswith("error: ") or "\n\n" in message):
            problems.append("not one paragraph starting 'error: '")
        if "Traceback" in out + err:
            problems.append("a traceback")
        if wall_s > WALL_S:
            problems.append(f"{wall_s:.1f} s")
        if growth_mb > GROWTH_MB:
            problems.append(f"peak RSS {growth_mb:.0f} MB above the start")
        if problems:
            failures.append(f"{mutant.category} / {mutant.name!r}: {', '.join(problems)}: "
                            f"{(message or out)[:300]!r}")
        counts[(mutant.category, verdict or "crashed")] += 1
    accepted = sum(n for (_, v), n in counts.items() if v == "accepted")
    refused = sum(n for (_, v), n in counts.items() if v == "refused")
    with capsys.disabled():
        print(f"\n{len(all_mutants)} mutants: {accepted} accepted, {refused} refused; slowest "
              f"{slowest[0]:.2f} s ({slowest[1]!r}); peak RSS "
              f"{peak_rss_mb() - baseline_mb:.0f} MB above the start")
        for category in dict.fromkeys(m.category for m in all_mutants):
            print(f"  {category:16} " + ", ".join(
                f"{n} {v}" for (c, v), n in sorted(counts.items()) if c == category))
    assert not failures, f"{len(failures)} mutant(s) misbehaved:\n" + "\n".join(failures[:20])
    for category in ("alias bomb", "recursive alias", "nesting"):  # never valid configuration
        assert counts[(category, "accepted")] == 0, category
    assert accepted > 20  # the generator still makes valid files too: the test can tell them


SCENARIOS = "scenarios: [SingleStream, MultiStream, Offline, Server]"


def offline(settings: str, mode: str = "short") -> str:
    """The demo campaign on Offline only, with these LoadGen settings, power off."""
    return (CAMPAIGN.replace(SCENARIOS, f"scenarios: [Offline]\n        settings: "
                                        f"{{Offline: {{{settings}}}}}")
            .replace("mode: short", f"mode: {mode}").replace("power: true", "power: false"))


def docker(line: str) -> str:
    return HOSTS.replace("      base_image:", f"      {line}\n      base_image:", 1)


# Every case of the bad-input list, each with the words of its refusal
ISSUE_CASES: dict[str, tuple[str | bytes, str, str]] = {
    "non-UTF-8": (HOSTS.encode().replace(b"Demo", b"D\xe9mo"), CAMPAIGN, "is not UTF-8 text"),
    "NUL byte": (HOSTS.replace("Demo", "D\x00mo"), CAMPAIGN, "control character U+0000"),
    "recursive alias": (HOSTS + "x: &a [*a]\n", CAMPAIGN, "refers to a node that contains it"),
    "deep nesting": (HOSTS + "x: " + "[" * 500 + "]" * 500 + "\n", CAMPAIGN,
                     "nested deeper than 50 levels"),
    "key [/]": (HOSTS.replace("  submitter: Demo", "  '[/]': Demo"), CAMPAIGN,
                "'[/]' is not a system description field"),
    "target_qps: fast": (HOSTS, offline("target_qps: fast"), "'target_qps' must be a number"),
    "target_qps: 0": (HOSTS, offline("target_qps: 0"), "'target_qps' must be a number"),
    "target_qps: -5": (HOSTS, offline("target_qps: -5"), "'target_qps' must be a number"),
    "target_qps: .nan": (HOSTS, offline("target_qps: .nan"), "(got nan)"),
    "target_qps: 10**400": (HOSTS, offline("target_qps: 1" + "0" * 400), "'target_qps' must"),
    "min_duration: .inf": (HOSTS, offline("min_duration: .inf"), "(got inf)"),
    "min_duration: -1": (HOSTS, offline("min_duration: -1"), "'min_duration' must be a whole"),
    "min_query_count: 1e30": (HOSTS, offline("min_query_count: 1e30"), "(got '1e30')"),
    "port: true": (HOSTS.replace("port: 8888", "port: true"), CAMPAIGN,
                   "analyzers[0].port: Input should be a valid integer"),
    "port: '2_2'": (HOSTS.replace("port: 8888", "port: '2_2'"), CAMPAIGN,
                    "analyzers[0].port: Input should be a valid integer"),
    "min_duration newline in submission": (HOSTS, offline('"min_duration\\n": 10', "submission"),
                                           "'min_duration\\n' is not a LoadGen setting"),
    "scenario twice": (HOSTS, CAMPAIGN.replace(SCENARIOS, "scenarios: [Offline, Offline]"),
                       "scenario Offline listed more than once"),
    "benchmark twice": (HOSTS, CAMPAIGN + "      - benchmark: digits\n",
                        "benchmark digits listed more than once"),
    "analyzer twice": (HOSTS + "  - {name: sim-wt310e, host: local, port: 8889}\n", CAMPAIGN,
                       "analyzer name(s) sim-wt310e used more than once"),
    "unserved scenario": (HOSTS, CAMPAIGN.replace(SCENARIOS, "scenarios: [Interactive]"),
                          "benchmark 'digits' does not serve Interactive"),
    "read-write /": (docker("mounts: [{source: /, target: /h, read_only: false}]"), CAMPAIGN,
                     "/ is part of the host's own system"),
    "mount option through a comma": (docker("mounts: [{source: '/d,readonly=false', "
                                            "target: /d}]"), CAMPAIGN, "without commas"),
    "docker_host on 0.0.0.0": (docker("docker_host: tcp://0.0.0.0:2375"), CAMPAIGN,
                               "is a plain TCP Docker API"),
    "/dev/zero inventory": (HOSTS, CAMPAIGN.replace("inventory: hosts.yaml",
                                                    "inventory: /dev/zero"),
                            "/dev/zero: is not a regular file"),
    # and a few more of the same kind
    "max_reruns: true": (HOSTS, re.sub(r"(?m)^max_reruns: .*$", "max_reruns: true", CAMPAIGN),
                         "max_reruns: Input should be"),
    "work_dir with a comma": (HOSTS.replace("work_dir: /var/tmp/subrun", "work_dir: /t,ro"),
                              CAMPAIGN, "without commas"),
}


@pytest.mark.parametrize("case", list(ISSUE_CASES))
def test_each_listed_case_is_refused_with_exit_2(case: str, tmp_path: Path) -> None:
    hosts, campaign, expected = ISSUE_CASES[case]
    mutant = Mutant("issue", case, hosts if isinstance(hosts, bytes) else hosts.encode(),
                    campaign.encode())
    code, out, err, wall_s = plan_in_process(tmp_path, mutant)
    assert code == 2, out + err
    assert expected in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and wall_s < WALL_S


WORST = {
    "alias bomb": ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)) + HOSTS,
                   CAMPAIGN, "aliases are expanded"),
    "/dev/zero inventory": (HOSTS, CAMPAIGN.replace("inventory: hosts.yaml",
                                                    "inventory: /dev/zero"),
                            "/dev/zero: is not a regular file"),
    "non-UTF-8": (HOSTS.replace("Demo", "D\xe9mo").encode("latin-1"), CAMPAIGN,
                  "is not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(WORST))
def test_console_script_refuses_the_worst_mutants_with_exit_2(case: str, tmp_path: Path) -> None:
    hosts, campaign, expected = WORST[case]
    (tmp_path / "hosts.yaml").write_bytes(hosts if isinstance(hosts, bytes) else hosts.encode())
    (tmp_path / "c.yaml").write_text(campaign)
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "subrun"), "plan", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr + proc.stdout
    assert time.monotonic() - start < 30  # the process start dominates; no hang


def readme_example(heading: str) -> str:
    """The first YAML example under a heading of README.md."""
    text = README.read_text()
    match = re.search(r"```yaml\n(.*?)```", text[text.index(heading):], re.DOTALL)
    assert match
    return match.group(1)


def test_the_readme_example_inventory_validates(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the example's keys live under ~/.ssh
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("a key file")
    path = tmp_path / "hosts.yaml"
    path.write_text(readme_example("## Configuration: hosts.yaml"))
    inventory = load_inventory(path)
    assert inventory.director is not None
    assert inventory.host(inventory.director.host)
    assert inventory.analyzer_for("node1").name == "wt310e-lab"


def test_the_readme_example_campaign_validates(tmp_path: Path) -> None:
    path = tmp_path / "campaign.yaml"
    path.write_text(readme_example("### The campaign file"))
    campaign = load_campaign(path)
    assert campaign.hosts[0].benchmarks[0].settings
