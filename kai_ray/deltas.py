"""Changes to the cluster, batched: what the adapter (or the simulator) feeds the coordinator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kai_ray.model import ClusterSnapshot, DraChanges, Node, Pod, PodGroup, Queue, Topology


@dataclass(frozen=True, slots=True)
class ClusterDeltas:
    nodes_upserted: tuple[Node, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    pods_upserted: tuple[Pod, ...] = ()
    pods_removed: tuple[str, ...] = ()  # "namespace/name"
    queues_upserted: tuple[Queue, ...] = ()
    queues_removed: tuple[str, ...] = ()
    pod_groups_upserted: tuple[PodGroup, ...] = ()  # priorities and preemptibility already resolved
    pod_groups_removed: tuple[str, ...] = ()  # "namespace/name"
    unusable_queues: Mapping[str, str] | None = None  # queues left out of the tree and why; None: unchanged
    topologies_upserted: tuple[Topology, ...] = ()
    topologies_removed: tuple[str, ...] = ()
    dra: DraChanges = field(default_factory=DraChanges)
    # Time-based fair share: every queue's past usage, replacing what was known (None: unchanged).
    queue_usage: Mapping[str, tuple[float, float, float]] | None = None

    def __bool__(self) -> bool:
        return any(
            (
                self.nodes_upserted,
                self.nodes_removed,
                self.pods_upserted,
                self.pods_removed,
                self.queues_upserted,
                self.queues_removed,
                self.pod_groups_upserted,
                self.pod_groups_removed,
                self.unusable_queues is not None,
                self.topologies_upserted,
                self.topologies_removed,
                self.dra,
                self.queue_usage is not None,
            )
        )

    @staticmethod
    def of_snapshot(snapshot: ClusterSnapshot) -> ClusterDeltas:
        """Everything in a snapshot, as additions."""
        return ClusterDeltas(
            nodes_upserted=snapshot.nodes,
            pods_upserted=snapshot.pods,
            queues_upserted=snapshot.queues,
            pod_groups_upserted=snapshot.pod_groups,
            unusable_queues=dict(snapshot.unusable_queues),
            topologies_upserted=snapshot.topologies,
            dra=DraChanges.of_objects(snapshot.dra),
        )
