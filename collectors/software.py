"""The software stack inside the benchmark image: framework and library versions from the image.

A probe (Python's standard library only) runs in a one-shot container of the image and prints
one JSON line: the Python version, every installed distribution, the image's os-release and its
*_VERSION environment (CUDA_VERSION, TRT_VERSION, ...), which vendor images set for system
libraries pip does not know about. Hosts without Docker run the same probe natively, with the
Python of the benchmark's native environment when one is given in place of an image.
"""

from __future__ import annotations

import json

from pydantic import Field

from collectors.command import Facts, run_probe, why_failed
from collectors.osinfo import parse_os_release
from lab.config import DockerSettings
from lab.docker import Engine
from lab.errors import CommandFailed, ImageError
from lab.host import CommandResult, Host
from lab.image_facts import image_fact
from lab.native import env_python

PROBE = r"""
import json, os, platform
from importlib import metadata
packages = {}
for dist in metadata.distributions():
    name = dist.metadata.get("Name")
    if name:
        packages[name.lower().replace("_", "-")] = dist.version
try:
    with open("/etc/os-release") as f:
        os_release = f.read()
except OSError:
    os_release = ""
env = {k: v for k, v in os.environ.items() if k.endswith("_VERSION")}
print(json.dumps({"python": platform.python_version(), "packages": packages,
                  "os_release": os_release, "env": env}))
"""
PROBE_ARGV = ("python3", "-c", PROBE)
PROBE_TIMEOUT_S = 120.0

# Distribution name -> framework name, in the order a submission names them (runtime first).
FRAMEWORKS = (
    ("tensorrt-llm", "TensorRT-LLM"), ("tensorrt", "TensorRT"), ("vllm", "vLLM"),
    ("sglang", "SGLang"), ("torch", "PyTorch"), ("tensorflow", "TensorFlow"),
    ("tensorflow-cpu", "TensorFlow"), ("tflite-runtime", "TensorFlow Lite"),
    ("onnxruntime-gpu", "ONNX Runtime"), ("onnxruntime", "ONNX Runtime"),
    ("openvino", "OpenVINO"), ("jax", "JAX"), ("paddlepaddle", "PaddlePaddle"),
    ("mxnet", "MXNet"),
)
LIBRARIES = ("mlcommons-loadgen", "numpy", "transformers", "accelerate", "triton",
             "torchvision", "diffusers", "optimum", "flash-attn", "pycuda", "cuda-python")
# Environment set by vendor images for libraries outside pip: name shown -> variable.
SYSTEM_LIBRARIES = (("CUDA", "CUDA_VERSION"), ("cuDNN", "CUDNN_VERSION"),
                    ("TensorRT", "TRT_VERSION"), ("TensorRT", "TENSORRT_VERSION"),
                    ("NCCL", "NCCL_VERSION"), ("ROCm", "ROCM_VERSION"))


class SoftwareStack(Facts):
    """What the benchmark image (or a native host) runs the benchmark with."""

    source: str  # the image name, or "host" for native runs
    python: str | None = None
    os_name: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    gap: str | None = None  # why nothing is known

    @property
    def framework_text(self) -> str:
        """E.g. "vLLM 0.6.3, PyTorch 2.4.0"; the Python version when there is no ML framework."""
        found = dict.fromkeys(f"{label} {self.packages[dist]}" for dist, label in FRAMEWORKS
                              if dist in self.packages)
        for label, var in SYSTEM_LIBRARIES:
            if label == "TensorRT" and var in self.env and not any("TensorRT" in f for f in found):
                found[f"TensorRT {self.env[var]}"] = None
        if found:
            return ", ".join(found)
        numpy = f", NumPy {self.packages['numpy']}" if "numpy" in self.packages else ""
        return f"Python {self.python}{numpy} (no ML framework)"

    @property
    def stack_text(self) -> str:
        """Python, libraries and system libraries, e.g. "Python 3.11.2, numpy 1.26.4"."""
        parts = [f"Python {self.python}"] if self.python else []
        parts += [f"{lib} {self.packages[lib]}" for lib in LIBRARIES if lib in self.packages]
        parts += list(dict.fromkeys(f"{label} {self.env[var]}" for label, var in SYSTEM_LIBRARIES
                                    if var in self.env))
        if self.os_name:
            parts.append(f"{self.os_name} ({self.source})")
        return ", ".join(parts)


def collect(host: Host, settings: DockerSettings, image: str | None) -> SoftwareStack:
    """Run the probe in a one-shot container of image (or natively when the host has no Docker)."""
    if settings.engine and not image:
        return SoftwareStack(source="-", gap="no benchmark image given to look inside")
    source = image if settings.engine and image else "host"
    try:
        result = _run(host, settings, image)
    except (ImageError, CommandFailed) as e:
        return SoftwareStack(source=source, gap=str(e))
    if not result.ok:
        return SoftwareStack(source=source, gap=why_failed(result))
    try:
        return parse(result.stdout, source)
    except ValueError as e:
        return SoftwareStack(source=source, gap=f"in {source}: {e}")


def _run(host: Host, settings: DockerSettings, image: str | None) -> CommandResult:
    if settings.engine and image:
        return image_fact(Engine(host, settings), image, PROBE_ARGV, PROBE_TIMEOUT_S)
    argv = (env_python(image), *PROBE_ARGV[1:]) if image else PROBE_ARGV  # image: a native env
    return run_probe(host, argv, timeout_s=PROBE_TIMEOUT_S)


def parse(text: str, source: str) -> SoftwareStack:
    """Build SoftwareStack from the probe's JSON line (the last line of its output)."""
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise ValueError(f"the software probe printed no JSON line: {text.strip()[-200:]!r}")
    data = json.loads(lines[-1])
    os_release = parse_os_release(data.get("os_release", ""))
    return SoftwareStack(source=source, python=data.get("python"),
                         os_name=os_release.get("PRETTY_NAME"),
                         packages=data.get("packages", {}), env=data.get("env", {}))


def merge(stacks: list[SoftwareStack]) -> tuple[str | None, str | None]:
    """Framework and other_software_stack text for a system that runs several images."""
    known = [s for s in stacks if not s.gap]
    frameworks = dict.fromkeys(s.framework_text for s in known)
    stacks_text = dict.fromkeys(s.stack_text for s in known)
    return "; ".join(frameworks) or None, "; ".join(stacks_text) or None
