"""The campaign's outputs in one object: every path under out/<campaign>/ comes from
bench.campaign.CampaignPaths, and no other module spells those folder names."""

from __future__ import annotations

import re
from pathlib import Path

from bench.campaign import Campaign, CampaignPaths

ROOT = Path(__file__).resolve().parents[1]
OWNERS = ("campaign.py", "layout.py", "training_package.py")  # out/<campaign>/, and
# the paths inside the tree and the training package


def test_paths_of_a_campaign_sit_under_its_folder(tmp_path: Path) -> None:
    campaign = Campaign.model_validate({"name": "nightly", "output_dir": str(tmp_path),
                                        "hosts": [{"host": "a", "benchmarks": [
                                            {"benchmark": "digits"}]}]})
    paths = campaign.paths
    assert paths == CampaignPaths(tmp_path, "nightly")
    root = tmp_path / "nightly"
    assert (paths.store, paths.tree, paths.systems, paths.checker, paths.tarball,
            paths.report) == (root / "store", root / "submission", root / "systems",
                              root / "checker", root / "submission.tar.gz", root / "report")
    assert (paths.history, paths.trends) == (tmp_path / "history.sqlite", tmp_path / "trends")


def test_no_other_package_module_builds_a_campaign_output_path() -> None:
    spelled = re.compile(r'/ "(store|submission|systems|checker|report|trends)"|'
                         r'"submission\.tar\.gz"|"history\.sqlite"')
    offenders = [str(p.relative_to(ROOT)) for pkg in ("bench", "flows", "submission")
                 for p in (ROOT / pkg).rglob("*.py")
                 if p.name not in OWNERS and spelled.search(p.read_text())]
    assert offenders == []
