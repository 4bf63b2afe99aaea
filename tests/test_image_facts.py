"""Answers of image-only commands kept by image ID: asked once per image, never kept when they
failed, asked again for another image; and on a real engine, the second answer starts no
container."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lab.config import DockerSettings, Inventory
from lab.docker import LABEL_ONESHOT, Engine
from lab.image_facts import image_fact, kept_path
from lab.transport import open_host
from testkit.fake_docker import FakeEngine
from testkit.fake_host import Call, FakeHost, Reply

ARGV = ["sha256sum", "/opt/site/data.csv"]


def engine_answering(exit_status: int = 0) -> tuple[Engine, FakeHost, FakeEngine]:
    host, images = FakeHost("node1"), FakeEngine()
    images.install(host)
    images.add("subrun/digits:1")

    def run(call: Call) -> Reply:
        image = next(a for a in call.argv if a.startswith("subrun/"))
        return Reply(f"{images.images[image][7:15]}  /opt/site/data.csv\n",
                     exit_status=exit_status)

    host.on(["docker", "run"], run)
    return Engine(host, DockerSettings()), host, images


def containers(host: FakeHost) -> int:
    return sum(argv[:2] == ("docker", "run") for argv in host.commands())


def test_an_answer_is_kept_by_image_id_and_asked_again_for_another_image(tmp_path: Path) -> None:
    engine, host, images = engine_answering()
    first = image_fact(engine, "subrun/digits:1", ARGV, 60, cache_dir=tmp_path)
    again = image_fact(engine, "subrun/digits:1", ARGV, 60, cache_dir=tmp_path)
    assert again.ok and again.stdout == first.stdout and containers(host) == 1
    images.images["subrun/digits:1"] = "sha256:" + "e" * 64  # the tag now names another image
    rebuilt = image_fact(engine, "subrun/digits:1", ARGV, 60, cache_dir=tmp_path)
    assert rebuilt.stdout.startswith("eeeeeeee") and containers(host) == 2


def test_a_failed_answer_is_never_kept(tmp_path: Path) -> None:
    engine, host, _ = engine_answering(exit_status=1)
    for _ in range(2):
        assert not image_fact(engine, "subrun/digits:1", ARGV, 60, cache_dir=tmp_path).ok
    assert containers(host) == 2
    assert not list(tmp_path.rglob("*.json"))


def test_a_damaged_kept_answer_is_asked_again(tmp_path: Path) -> None:
    engine, host, images = engine_answering()
    path = kept_path(tmp_path, "node1", images.images["subrun/digits:1"], ARGV, None)
    path.parent.mkdir(parents=True)
    path.write_text('{"stdout": ')
    assert image_fact(engine, "subrun/digits:1", ARGV, 60, cache_dir=tmp_path).ok
    assert containers(host) == 1 and json.loads(path.read_text())["argv"] == ARGV


@pytest.mark.lab
def test_on_a_real_engine_the_kept_answer_starts_no_container(lab_inventory: Inventory,
                                                              tmp_path: Path) -> None:
    config = lab_inventory.host("h2")
    with open_host(config) as host:
        engine = Engine(host, config.docker)
        image = "subrun/debian:bookworm"
        argv = ["cat", "/etc/debian_version"]
        began = time.time()
        first = image_fact(engine, image, argv, 120, cache_dir=tmp_path)
        second = image_fact(engine, image, argv, 120, cache_dir=tmp_path)
        events = engine.docker(
            ["events", "--since", str(int(began) - 1), "--until", str(int(time.time()) + 1),
             "--filter", f"label={LABEL_ONESHOT}=1", "--filter", "event=start",
             "--format", "{{json .}}"], what="reading one-shot container events")
    assert first.ok and first.stdout.strip()[:2].isdigit()
    assert second.stdout == first.stdout and second.duration_s == 0.0
    started = [json.loads(line) for line in events.stdout.splitlines()]
    assert len([e for e in started if e["Actor"]["Attributes"].get("image") == image]) == 1
