"""Fair-share division, queue capacity checks and queue order (KAI's proportion plugin)."""

from coordinator.fairshare.division import Division, divide
from coordinator.fairshare.tree import QueueTree
from coordinator.fairshare.usage import UsageLedger, UsageWindow, capacity_of, default_resolution, usage_array
from kai_ray.model.fairshare import RESOURCES, UNLIMITED, QueueSpec

__all__ = [
    "RESOURCES",
    "UNLIMITED",
    "Division",
    "QueueSpec",
    "QueueTree",
    "UsageLedger",
    "UsageWindow",
    "capacity_of",
    "default_resolution",
    "divide",
    "usage_array",
]
