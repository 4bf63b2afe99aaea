"""Campaign files for flow tests: the lab's hosts, short mode, output in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.targets import OFFLINE_ABOVE_REACH_QPS

# Test campaigns that compare no run with another (no compliance) run their performance runs
# for a second: short mode's 3-s floor (bench/short_mode.yaml) is for a figure compared within
# 10 %, and a test that only checks a run's record, files or verdict needs none of it.
QUICK_MS = 1000
QUICK_SCENARIOS = ("Offline", "SingleStream", "MultiStream")
# For power campaigns whose tests check whose analyzer read a run and when, not a figure:
# SingleStream's two 5-s power phases last 5 s each on any host at any load, where Offline's last
# as long as the samples issued for the fastest host take the host they run on (15-25 s each
# under the suite's load, with both cores busy the whole time).
QUICK_POWER_SCENARIOS = ("SingleStream",)


def write_campaign(folder: Path, name: str, inventory: Path, hosts: list[str], *,
                   scenarios: tuple[str, ...] = ("Offline",), compliance: bool = False,
                   accuracy: bool = True, power: bool = False, mode: str = "short",
                   settings: dict[str, dict[str, float]] | None = None) -> Path:
    """A campaign YAML running the digits benchmark on hosts; returns its path. Offline runs
    aim just above what the lab's hosts reach unless settings say otherwise: the manifest's
    default (800,000 samples/s) makes a 3-s run last 6 to 9 s on the lab. In short mode
    without compliance, the scenarios without a latency bound run for QUICK_MS unless settings
    give their own duration; submission mode keeps LoadGen's official durations."""
    settings = {**(settings or {})}
    settings["Offline"] = {"target_qps": OFFLINE_ABOVE_REACH_QPS, **settings.get("Offline", {})}
    if mode == "short" and not compliance:
        for scenario in set(scenarios) & set(QUICK_SCENARIOS):
            settings[scenario] = {"min_duration": QUICK_MS, **settings.get(scenario, {})}
    campaign = {
        "name": name, "inventory": str(inventory), "round": "v6.1", "division": "open",
        "mode": mode, "accuracy": accuracy, "compliance": compliance, "power": power,
        "output_dir": str(folder / "out"),
        "hosts": [{"host": h, "benchmarks": [{"benchmark": "digits",
                                              "scenarios": list(scenarios),
                                              "settings": settings}]} for h in hosts],
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return path
