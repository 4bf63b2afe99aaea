"""The system description of a Training submission, from the same collectors as inference.

mlperf-logging's `system_desc_checker` asks for the inference fields plus the host's vCPU count,
takes `status` in its own words ("Available on-premise", ...) and joins several fields into its
summary table as text, so every value is written as a string. Which fields it requires is its
own decision: the package checker runs it on the file this makes.
"""

from __future__ import annotations

from collections.abc import Mapping

from collectors.cpu import CpuInfo
from collectors.detection import Value

# the inference rules' status words -> the Training rules' availability categories
STATUS = {"available": "Available on-premise", "preview": "Preview",
          "rdi": "Research, Development, or Internal (RDI)"}


def training_system(system: Mapping[str, Value], cpu: CpuInfo | None) -> dict[str, str]:
    """An inference system JSON (collectors.system_json) as a Training system JSON."""
    fields = {key: "" if value is None else str(value) for key, value in system.items()}
    status = fields.get("status", "")
    fields["status"] = STATUS.get(status.lower(), status)
    if not fields.get("host_processor_vcpu_count"):
        logical = cpu.logical_cpus if cpu else None
        fields["host_processor_vcpu_count"] = str(logical) if logical else ""
    return fields
