"""kai-ray's cluster model: resources, nodes, pods, pod groups, queues; ``fairshare`` holds the
fair-share divider's inputs (queue specs, resource order) and is public as a module."""

from kai_ray.model.objects import (
    UNLIMITED,
    AffinityTerm,
    Node,
    Pod,
    PodGroup,
    PodState,
    PriorityClass,
    Queue,
    QueueResource,
    SelectorRequirement,
    SubGroup,
    Taint,
    Toleration,
)
from kai_ray.model.resources import (
    GPU_RESOURCE,
    QUEUE_RESOURCES,
    ZERO,
    GpuShare,
    QueueQuantities,
    ResourceVector,
)
from kai_ray.model.snapshot import ClusterSnapshot, LoadReport
from kai_ray.model.topology import Topology, TopologyConstraint, TopologyLevel

__all__ = [
    "GPU_RESOURCE",
    "QUEUE_RESOURCES",
    "UNLIMITED",
    "ZERO",
    "AffinityTerm",
    "ClusterSnapshot",
    "GpuShare",
    "LoadReport",
    "Node",
    "Pod",
    "PodGroup",
    "PodState",
    "PriorityClass",
    "Queue",
    "QueueQuantities",
    "QueueResource",
    "ResourceVector",
    "SelectorRequirement",
    "SubGroup",
    "Taint",
    "Toleration",
    "Topology",
    "TopologyConstraint",
    "TopologyLevel",
    "fairshare",
]
