"""Fair-share division, queue capacity checks and queue order (KAI's proportion plugin)."""

from coordinator.fairshare.division import Division, divide
from coordinator.fairshare.tree import RESOURCES, UNLIMITED, QueueSpec, QueueTree

__all__ = ["RESOURCES", "UNLIMITED", "Division", "QueueSpec", "QueueTree", "divide"]
