"""The docker CLI as a FakeHost answers it, for tests of provisioning decisions.

Only what `lab.provision` asks: image lookups (ID and layers), `docker info` (architecture, data
root) and `docker build` (which reads its context from stdin and adds the tagged image). An
unknown image gets the engine's own "No such image" answer; the build's context is kept, so a
test can see what was sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from testkit.fake_host import Call, FakeHost, Reply


@dataclass
class FakeEngine:
    """The images one fake engine holds (ref -> ID), and the builds it was asked for."""

    images: dict[str, str] = field(default_factory=dict)
    architecture: str = "x86_64"
    root_dir: str = "/var/lib/docker"
    builds: list[tuple[str, int]] = field(default_factory=list)  # (ref, context bytes)

    def install(self, host: FakeHost) -> FakeHost:
        """Make host answer the docker commands of provisioning from this engine."""
        host.on(["docker", "image", "inspect"], self._inspect)
        host.on(["docker", "info"], self._info)
        host.on(["docker", "build"], self._build)
        return host

    def add(self, ref: str) -> str:
        """Put an image into the engine; its ID."""
        self.images[ref] = "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
        return self.images[ref]

    def _inspect(self, call: Call) -> Reply:
        fmt, ref = call.argv[call.argv.index("--format") + 1], call.argv[-1]
        if ref not in self.images:
            return Reply(stderr=f"Error response from daemon: No such image: {ref}\n",
                         exit_status=1)
        if "RootFS.Layers" in fmt:
            return Reply(json.dumps([f"sha256:layer-of-{self.images[ref][7:19]}"]) + "\n")
        return Reply(self.images[ref] + "\n")

    def _info(self, call: Call) -> Reply:
        fmt = call.argv[call.argv.index("--format") + 1]
        return Reply((self.architecture if "Architecture" in fmt else self.root_dir) + "\n")

    def _build(self, call: Call) -> Reply:
        ref = call.argv[call.argv.index("--tag") + 1]
        self.builds.append((ref, len(call.stdin)))
        self.add(ref)
        return Reply(f"Successfully tagged {ref}\n")
