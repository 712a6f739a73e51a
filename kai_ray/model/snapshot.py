"""A whole cluster at one instant: the input of one scheduling session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kai_ray.model.dra import DraObjects
from kai_ray.model.objects import Node, Pod, PodGroup, PriorityClass, Queue
from kai_ray.model.topology import Topology


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What the loader did besides building objects: kinds it skipped, warnings."""

    skipped_kinds: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pod_groups: tuple[PodGroup, ...] = ()
    queues: tuple[Queue, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    report: LoadReport = field(default_factory=LoadReport)
    # Queues that exist but are left out of the tree (orphans, cycles, invalid ones): name -> why.
    # Jobs naming one wait with that reason rather than "the queue does not exist".
    unusable_queues: Mapping[str, str] = field(default_factory=dict)
    topologies: tuple[Topology, ...] = ()
    dra: DraObjects = field(default_factory=DraObjects)  # ResourceSlices, DeviceClasses, ResourceClaims
    # Past usage per queue for time-based fair share: (gpu, cpu, memory), each normalized to the
    # cluster's capacity over the usage window (KAI's usage/capacity); empty = no usage.
    queue_usage: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
