"""A deterministic generator of broken hosts.yaml and campaign files, from the shipped ones.

Each mutant is one file changed in one way a person, an editor or an attacker might change it:
random byte flips and truncations, a value swapped for one of another type or an extreme number,
other encodings (NUL bytes, Latin-1, UTF-16, a BOM), deep nesting, recursive aliases and alias
bombs, keys made of markup or control characters, and LoadGen settings out of range. The same
seed always gives the same mutants, so a failure names a mutant that can be replayed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOSTS = (ROOT / "hosts.yaml").read_text()
CAMPAIGN = (ROOT / "campaigns" / "demo.yaml").read_text().replace(
    "name: demo", "name: mutant-demo\ninventory: hosts.yaml\noutput_dir: out")
# the values a key may be given instead of its own: other types, and numbers at the extremes
SWAPS = ["true", "false", "~", "0", "-1", "-5", "1.5", ".nan", ".inf", "-.inf", "''", "[]", "{}",
         "'x'", "'[/]'", "'[bold red]'", "1e30", "1.0e+400", "0x10", "0o17", "'2_2'", "2_2",
         "1" + "0" * 400, "-" + "9" * 30, "9" * 5000, "2001-13-45", "!!binary Zm9v", "!!binary x",
         "[1, [2, [3]]]", "{a: {b: {c: d}}}", "'\\u0000'", '"\\x00"', "'a\\nb'", "*undefined",
         "!!python/object:os.system x", "'tcp://0.0.0.0:2375'", "'/,readonly=false'", "|\n  x"]
KEYS = ["'[/]'", "'[bold]x[/bold]'", '"min_duration\\n"', '"tab\\tkey"', "'ключ'", "''",
        "'" + "k" * 300 + "'", "? [a, b]", "? {a: b}", "1", "null", "<<", "'*'", "'&a'",
        '"\\u202e"', "'a: b'", "'-'", "'$(reboot)'", "'../../etc'", "hosts"]
LOADGEN_KEYS = ["target_qps", "target_latency", "min_duration", "max_duration", "min_query_count",
                "max_query_count", "samples_per_query", "coalesce_queries", "qsl_rng_seed",
                "accuracy_log_probability", "target_latency_percentile", "mode",
                "min_duraton", "target_qps\\n", "TARGET_QPS", "*.Offline.target_qps",
                "resnet50.Server.min_duration", "a.b", "performance_sample_count_override"]
LOADGEN_VALUES = ["fast", "0", "-5", "-1", ".nan", ".inf", "1" + "0" * 400, "1e30", "true", "1.5",
                  "100", "18446744073709551615", "18446744073709551616", "9223372036854",
                  "9223372036855", "1000000000", "1000000001", "[1]", "{a: 1}", "~", "0x10",
                  "2000", "99", "1", "0.5"]


@dataclass(frozen=True)
class Mutant:
    """One mutated pair of files and what was done to make it."""

    category: str
    name: str
    hosts: bytes
    campaign: bytes


def mutants(seed: int = 15) -> Iterator[Mutant]:
    """Every mutant, in a fixed order: about 40 per category."""
    rng = random.Random(seed)
    yield from _byte_flips(rng, 50)
    yield from _truncations(rng, 40)
    yield from _type_swaps(rng, 60)
    yield from _encodings()
    yield from _nesting()
    yield from _aliases()
    yield from _weird_keys()
    yield from _loadgen_settings(rng, 45)
    yield from _structure()


def _pair(category: str, name: str, hosts: str | bytes = HOSTS,
          campaign: str | bytes = CAMPAIGN) -> Mutant:
    def raw(text: str | bytes) -> bytes:
        return text if isinstance(text, bytes) else text.encode()

    return Mutant(category, name, raw(hosts), raw(campaign))


def _one_file(rng: random.Random) -> tuple[str, str]:
    return ("hosts", HOSTS) if rng.random() < 0.5 else ("campaign", CAMPAIGN)


def _as(which: str, category: str, name: str, text: str | bytes) -> Mutant:
    return _pair(category, name, hosts=text) if which == "hosts" \
        else _pair(category, name, campaign=text)


def _byte_flips(rng: random.Random, count: int) -> Iterator[Mutant]:
    for i in range(count):
        which, text = _one_file(rng)
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        yield _as(which, "byte flip", f"{which} flip {i}", bytes(data))


def _truncations(rng: random.Random, count: int) -> Iterator[Mutant]:
    for i in range(count):
        which, text = _one_file(rng)
        data = text.encode()
        cut = rng.randrange(len(data))
        yield _as(which, "truncation", f"{which} cut at {cut} ({i})", data[:cut])


VALUE = re.compile(r"^(\s*(?:- )?[\w.-]+:) (\S.*)$", re.MULTILINE)


def _type_swaps(rng: random.Random, count: int) -> Iterator[Mutant]:
    for i in range(count):
        which, text = _one_file(rng)
        spots = list(VALUE.finditer(text))
        spot = rng.choice(spots)
        value = rng.choice(SWAPS)
        mutated = text[:spot.start(2)] + value + text[spot.end(2):]
        yield _as(which, "type swap", f"{which} {spot.group(1).strip()} {value[:20]} ({i})",
                  mutated)


def _encodings() -> Iterator[Mutant]:
    for which, text in (("hosts", HOSTS), ("campaign", CAMPAIGN)):
        data = text.encode()
        middle = len(data) // 2
        variants = {
            "NUL byte": data[:middle] + b"\x00" + data[middle:],
            "NUL bytes everywhere": data.replace(b" ", b"\x00"),
            "bell character": data[:middle] + b"\x07" + data[middle:],
            "invalid UTF-8": data[:middle] + b"\xff\xfe\xfd" + data[middle:],
            "lone continuation byte": data[:middle] + b"\x80" + data[middle:],
            "Latin-1": text.replace("#", "# \u00e9t\u00e9").encode("latin-1"),
            "UTF-16 with BOM": text.encode("utf-16"),
            "UTF-16-LE, no BOM": text.encode("utf-16-le"),
            "UTF-32": text.encode("utf-32"),
            "UTF-8 BOM": b"\xef\xbb\xbf" + data,
            "CRLF line ends": data.replace(b"\n", b"\r\n"),
            "CR line ends": data.replace(b"\n", b"\r"),
            "tabs for indentation": data.replace(b"  ", b"\t"),
            "empty file": b"",
            "only a BOM": b"\xef\xbb\xbf",
            "binary noise": bytes(range(256)) * 4,
            "overlong UTF-8 slash": data[:middle] + b"\xc0\xaf" + data[middle:],
            "surrogate in UTF-8": data[:middle] + b"\xed\xa0\x80" + data[middle:],
        }
        for name, variant in variants.items():
            yield _as(which, "encoding", f"{which} {name}", variant)


def _nesting() -> Iterator[Mutant]:
    for depth in (10, 49, 60, 1000, 100_000):
        yield _pair("nesting", f"flow list depth {depth}",
                    hosts=HOSTS + "extra: " + "[" * depth + "]" * depth + "\n")
        yield _pair("nesting", f"flow map depth {depth}",
                    campaign=CAMPAIGN + "extra: " + "{a: " * depth + "1" + "}" * depth + "\n")
    block = "".join("  " * i + f"k{i}:\n" for i in range(200))
    yield _pair("nesting", "block map depth 200", hosts=HOSTS + block + "  " * 200 + "v\n")
    yield _pair("nesting", "unclosed 10000 brackets", hosts="hosts: " + "[" * 10_000)
    yield _pair("nesting", "block list depth 300",
                campaign=CAMPAIGN + "x:\n" + "".join("  " * i + "-\n" for i in range(300)))


def _aliases() -> Iterator[Mutant]:
    recursive = {
        "self list": "a: &a [*a]\n",
        "self map": "a: &a {b: *a}\n",
        "mutual": "a: &a [&b [*a]]\n",
        "deep self": "a: &a [[[[[*a]]]]]\n",
        "merge self": "a: &a {<<: *a}\n",
    }
    for name, text in recursive.items():
        yield _pair("recursive alias", f"hosts {name}", hosts=HOSTS + text)
        yield _pair("recursive alias", f"campaign {name}", campaign=CAMPAIGN + text)
    yield _pair("recursive alias", "hosts list is itself",
                hosts=HOSTS.replace("hosts:\n", "hosts: &h\n  - *h\n", 1))
    for fan, levels in ((10, 9), (10, 6), (100, 4), (2, 30), (3, 5), (1000, 2)):
        lines = [f"a0: &a0 [{', '.join(['x'] * fan)}]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
        bomb = "\n".join(lines) + "\n"
        yield _pair("alias bomb", f"hosts {fan}^{levels}", hosts=bomb + HOSTS)
        yield _pair("alias bomb", f"campaign {fan}^{levels}",
                    campaign=CAMPAIGN + bomb + f"extra: *a{levels - 1}\n")
    yield _pair("alias bomb", "hosts list of a bomb",
                hosts="b: &b [" + ", ".join(["x"] * 100) + "]\n"
                      "c: &c [" + ", ".join(["*b"] * 100) + "]\n"
                      "hosts: [" + ", ".join(["*c"] * 100) + "]\n")
    yield _pair("alias bomb", "merge-key bomb",
                hosts="a: &a {" + ", ".join(f"k{i}: v" for i in range(300)) + "}\n"
                      "b: &b [" + ", ".join(["*a"] * 300) + "]\n" + HOSTS)


def _weird_keys() -> Iterator[Mutant]:
    for key in KEYS:
        yield _pair("weird key", f"hosts top {key[:20]}", hosts=HOSTS + f"{key}: 1\n")
        yield _pair("weird key", f"campaign top {key[:20]}", campaign=CAMPAIGN + f"{key}: 1\n")
        host_key = HOSTS.replace("    transport: local\n", f"    transport: local\n    {key}: x\n")
        yield _pair("weird key", f"host entry {key[:20]}", hosts=host_key)


def _loadgen_settings(rng: random.Random, count: int) -> Iterator[Mutant]:
    for i in range(count):
        scenario = rng.choice(["Offline", "Server", "SingleStream", "MultiStream", "Interactive"])
        key = rng.choice(LOADGEN_KEYS)
        value = rng.choice(LOADGEN_VALUES)
        mode = rng.choice(["short", "submission"])
        text = (CAMPAIGN.replace("mode: short", f"mode: {mode}")
                .replace("power: true", "power: false")
                .replace("scenarios: [SingleStream, MultiStream, Offline, Server]",
                         f"scenarios: [{scenario}]\n        settings:\n"
                         f"          {scenario}: {{\"{key}\": {value}}}"))
        yield _pair("loadgen setting", f"{mode} {scenario} {key}={value[:20]} ({i})",
                    campaign=text)


def _structure() -> Iterator[Mutant]:
    host = HOSTS[HOSTS.index("  - name: local"):HOSTS.index("analyzers:")]
    analyzer = HOSTS[HOSTS.index("  - name: sim-wt310e"):]
    scenarios = "scenarios: [SingleStream, MultiStream, Offline, Server]"
    bench = "      - benchmark: digits\n        " + scenarios + "\n"
    variants = [
        ("hosts", "host twice", HOSTS.replace("analyzers:", host + "analyzers:")),
        ("hosts", "analyzer twice", HOSTS + analyzer),
        ("hosts", "no hosts", HOSTS.replace("hosts:", "unused:")),
        ("hosts", "hosts empty", HOSTS[:HOSTS.index("hosts:")] + "hosts: []\n" +
         HOSTS[HOSTS.index("analyzers:"):]),
        ("hosts", "director unknown", HOSTS + "director: {host: director}\n"),
        ("hosts", "director local", HOSTS + "director: {host: local, port: 4950}\n"),
        ("hosts", "two documents", HOSTS + "---\n" + HOSTS),
        ("hosts", "a list, not a map", "- " + HOSTS.replace("\n", "\n  ")),
        ("hosts", "a scalar", "just text\n"),
        ("hosts", "read-write /", _docker(HOSTS, "mounts: [{source: /, target: /h, "
                                                 "read_only: false}]")),
        ("hosts", "read-only /", _docker(HOSTS, "mounts: [{source: /, target: /h}]")),
        ("hosts", "mount read_only 'no'", _docker(HOSTS, "mounts: [{source: /d, target: /d, "
                                                         "read_only: 'no'}]")),
        ("hosts", "docker_host tcp", _docker(HOSTS, "docker_host: tcp://0.0.0.0:2375")),
        ("hosts", "docker_host loopback", _docker(HOSTS, "docker_host: tcp://127.0.0.1:2375")),
        ("hosts", "work_dir with a comma", HOSTS.replace("work_dir: /var/tmp/subrun",
                                                         "work_dir: /tmp/a,readonly")),
        ("campaign", "scenario twice", CAMPAIGN.replace(scenarios,
                                                        "scenarios: [Offline, Offline]")),
        ("campaign", "benchmark twice", CAMPAIGN + bench),
        ("campaign", "host twice", CAMPAIGN + "  - host: local\n    benchmarks:\n" + bench),
        ("campaign", "unknown host", CAMPAIGN.replace("host: local", "host: lokal")),
        ("campaign", "unserved scenario", CAMPAIGN.replace(scenarios,
                                                           "scenarios: [Interactive]")),
        ("campaign", "no scenarios", CAMPAIGN.replace(scenarios, "scenarios: []")),
        ("campaign", "unknown benchmark", CAMPAIGN.replace("digits", "digitz")),
        ("campaign", "inventory /dev/zero", CAMPAIGN.replace("inventory: hosts.yaml",
                                                             "inventory: /dev/zero")),
        ("campaign", "inventory a folder", CAMPAIGN.replace("inventory: hosts.yaml",
                                                            "inventory: /")),
        ("campaign", "inventory missing", CAMPAIGN.replace("inventory: hosts.yaml",
                                                           "inventory: nope.yaml")),
        ("campaign", "unknown round", CAMPAIGN.replace("round: v6.1", "round: v9.9")),
        ("campaign", "round a path", CAMPAIGN.replace("round: v6.1", "round: ../../etc/passwd")),
    ]
    for which, name, text in variants:
        yield _as(which, "structure", name, text)


def _docker(hosts: str, line: str) -> str:
    """hosts with one more line in the first host's `docker:` settings."""
    return hosts.replace("      base_image:", f"      {line}\n      base_image:", 1)
