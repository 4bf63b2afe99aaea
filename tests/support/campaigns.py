"""Campaign files for flow tests: the lab's hosts, short mode, output in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.targets import OFFLINE_ABOVE_REACH_QPS


def write_campaign(folder: Path, name: str, inventory: Path, hosts: list[str], *,
                   scenarios: tuple[str, ...] = ("Offline",), compliance: bool = False,
                   accuracy: bool = True, power: bool = False,
                   settings: dict[str, dict[str, float]] | None = None) -> Path:
    """A campaign YAML running the digits benchmark on hosts; returns its path. Offline runs
    aim just above what the lab's hosts reach unless settings say otherwise: the manifest's
    default (800,000 samples/s) makes a 3-s run last 6 to 9 s on the lab."""
    settings = {**(settings or {})}
    settings["Offline"] = {"target_qps": OFFLINE_ABOVE_REACH_QPS, **settings.get("Offline", {})}
    campaign = {
        "name": name, "inventory": str(inventory), "round": "v6.1", "division": "open",
        "mode": "short", "accuracy": accuracy, "compliance": compliance, "power": power,
        "output_dir": str(folder / "out"),
        "hosts": [{"host": h, "benchmarks": [{"benchmark": "digits",
                                              "scenarios": list(scenarios),
                                              "settings": settings}]} for h in hosts],
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return path
