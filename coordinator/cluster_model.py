"""The coordinator's picture of the cluster: the latest record of every object, by key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from coordinator.dra_model import DraModel
from coordinator.dra_session import ClaimGrant
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, DraObjects, Node, Pod, PodGroup, PodState, Queue, Topology, with_changes


class ChangeLog:
    """The keys of the pods and pod groups written since a reader last took the log: what that
    reader (the session cache) looks at instead of every record. Past a size where reading
    everything is as cheap, the log stops and says so."""

    def __init__(self) -> None:
        self.pods: set[str] = set()
        self.groups: set[str] = set()
        self.overflowed = False

    def note(self, keys: set[str], key: str, limit: int) -> None:
        if self.overflowed:
            return
        keys.add(key)
        if len(self.pods) + len(self.groups) > limit:
            self.overflowed = True
            self.pods, self.groups = set(), set()


class ClusterModel:
    def __init__(self, change_log: bool = True) -> None:
        """``change_log`` off: a model no session reads (a copy kept to rebuild a coordinator from)
        keeps no log of the keys written; nothing would take it, and it held thousands of deleted
        pods' names until it overflowed."""
        self.assumed: dict[str, Pod] = {}  # bound by us, not yet seen bound by the watch
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        # Pods held by a scheduling gate: no session places them, so they are kept apart from
        # ``pods`` (and from the shards) until the gate goes (coordinator/admission.py decides them).
        self.gated: dict[str, Pod] = {}
        self.pod_groups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.unusable_queues: dict[str, str] = {}  # left out of the tree: name -> why
        self.topologies: dict[str, Topology] = {}
        self.queue_usage: dict[str, tuple[float, float, float]] = {}
        self.version = 0  # counts every change: the same version is the same cluster
        self.nodes_version = 0  # ... every change to the nodes
        self.queues_version = 0  # ... every change to the queues or their usage
        self.dra = DraModel()  # ResourceSlices, DeviceClasses, ResourceClaims
        self.assumed_claims: dict[str, tuple[str, ...]] = {}  # pod -> claims its committed bind allocated
        self._changes = ChangeLog()
        self._change_log = change_log
        self.claiming_pods: set[str] = set()  # pods that ask for ResourceClaims

    @property
    def uses_dra(self) -> bool:
        """Whether DRA can change a decision: devices published, claims, or pods asking for them."""
        return self.dra.in_use or bool(self.claiming_pods)

    def take_changes(self) -> ChangeLog | None:
        """The pods and pod groups written since the last call (None: too many to list, read
        everything), and a fresh log. The model has one such reader."""
        changes, self._changes = self._changes, ChangeLog()
        return None if changes.overflowed or not self._change_log else changes

    def _pod_written(self, key: str) -> None:
        if self._change_log:
            self._changes.note(self._changes.pods, key, self._log_limit())

    def _group_written(self, key: str) -> None:
        if self._change_log:
            self._changes.note(self._changes.groups, key, self._log_limit())

    def _log_limit(self) -> int:
        return 10_000 + 2 * (len(self.pods) + len(self.pod_groups))

    def apply(self, deltas: ClusterDeltas) -> ClusterDeltas:
        """Take in changes; returns them as the shards must see them (assumed binds kept)."""
        if deltas:
            self.version += 1
        pods = tuple(self._keep_assumption(pod) for pod in deltas.pods_upserted)
        if any(pod.gated for pod in pods):
            pods = self._hold_gated(pods)
        if deltas.nodes_upserted or deltas.nodes_removed:
            self.nodes_version += 1
        if deltas.queues_upserted or deltas.queues_removed:
            self.queues_version += 1
        arriving = {n.name for n in deltas.nodes_upserted if n.name not in self.nodes}
        if deltas.dra:
            self.dra.apply(deltas.dra)
        for node in deltas.nodes_upserted:
            if node.name not in self.nodes:
                self.dra.node_added(node.name)
            self.nodes[node.name] = node
        if arriving:
            pods += self._pods_on(arriving, {p.key for p in pods})
        for name in deltas.nodes_removed:
            self.nodes.pop(name, None)
        for pod in pods:
            self.gated.pop(pod.key, None)  # its gates are gone: a pod like any other from now on
            self.pods[pod.key] = pod
            self._pod_written(pod.key)
            if pod.resource_claims:
                self.claiming_pods.add(pod.key)
            else:
                self.claiming_pods.discard(pod.key)
        for key in deltas.pods_removed:
            self.gated.pop(key, None)
            self.pods.pop(key, None)
            self._pod_written(key)
            self.claiming_pods.discard(key)
            self.assumed.pop(key, None)
            for claim in self.assumed_claims.pop(key, ()):
                self.dra.forget(claim)
        for queue in deltas.queues_upserted:
            self.queues[queue.name] = queue
        for name in deltas.queues_removed:
            self.queues.pop(name, None)
        if deltas.unusable_queues is not None:
            self.unusable_queues = dict(deltas.unusable_queues)
            self.queues_version += 1
        for group in deltas.pod_groups_upserted:
            self.pod_groups[group.key] = group
            self._group_written(group.key)
        for key in deltas.pod_groups_removed:
            self.pod_groups.pop(key, None)
            self._group_written(key)
        for topology in deltas.topologies_upserted:
            self.topologies[topology.name] = topology
        for name in deltas.topologies_removed:
            self.topologies.pop(name, None)
        if deltas.queue_usage is not None:
            self.queue_usage = dict(deltas.queue_usage)
            self.queues_version += 1
        return replace(deltas, pods_upserted=pods)

    def _hold_gated(self, pods: tuple[Pod, ...]) -> tuple[Pod, ...]:
        """Set the gated pods aside; the others go on. Gates are only ever removed, so a gated pod
        was never in ``pods``; should it be (a snapshot's churn), it leaves as if deleted."""
        for pod in pods:
            if pod.gated:
                self.gated[pod.key] = pod
                if self.pods.pop(pod.key, None) is not None:
                    self._pod_written(pod.key)
        return tuple(pod for pod in pods if not pod.gated)

    def _pods_on(self, nodes: set[str], skip: set[str]) -> tuple[Pod, ...]:
        """Pods this model still places on ``nodes``: a node that was deleted and registers again
        brings back what is bound to it (the shards forgot those pods when it went away)."""
        return tuple(p for p in self.pods.values() if p.node in nodes and p.key not in skip)

    def _keep_assumption(self, pod: Pod) -> Pod:
        """An update that predates our bind (the watch has not seen it yet) must not undo it:
        the pod keeps its assumed node until the watch shows it bound, or the bind fails."""
        assumed = self.assumed.get(pod.key)
        if assumed is None:
            return pod
        if pod.node is None and pod.state in (PodState.PENDING, PodState.PIPELINED):
            return replace(pod, state=PodState.BINDING, node=assumed.node, gpu_groups=assumed.gpu_groups)
        del self.assumed[pod.key]  # confirmed (or gone terminal): the watch is authoritative again
        if pod.node == assumed.node and not pod.gpu_groups and assumed.gpu_groups:
            return replace(pod, gpu_groups=assumed.gpu_groups)
        return pod

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            nodes=tuple(self.nodes.values()),
            pods=tuple(self.pods.values()),
            pod_groups=tuple(self.pod_groups.values()),
            queues=tuple(self.queues.values()),
            unusable_queues=self.unusable_queues,
            topologies=tuple(self.topologies.values()),
            dra=self.dra.objects() if self.dra else DraObjects(),
            queue_usage=self.queue_usage,
        )

    def assume_bound(
        self, key: str, node: str, gpu_groups: tuple[str, ...], claims: Sequence[ClaimGrant] = ()
    ) -> Pod | None:
        """Record a committed bind before the watch confirms it, so it is not placed twice; the
        claims it allocates count as allocated until the watch shows what the binder wrote."""
        pod = self.pods.get(key)
        if pod is None:
            return None
        for grant in claims:
            self.dra.assume(grant.claim, grant.allocation)
        if claims:
            self.assumed_claims[key] = tuple(g.claim for g in claims)
        assumed = with_changes(pod, state=PodState.BINDING, node=node, gpu_groups=gpu_groups)
        self.pods[key] = self.assumed[key] = assumed
        self._pod_written(key)
        self.version += 1
        return assumed

    def forget_bind(self, key: str) -> Pod | None:
        """A bind failed: the pod is pending again."""
        pod = self.pods.get(key)
        self.assumed.pop(key, None)
        for claim in self.assumed_claims.pop(key, ()):
            self.dra.forget(claim)
        if pod is None:
            # Gone before its bind failed: nothing to undo here, but the cycle that handed the
            # bind out counted it (in its queue's allocation), and must not be replayed as is.
            self.version += 1
            return None
        if pod.state is not PodState.BINDING:
            return None
        pending = replace(pod, state=PodState.PENDING, node=None, gpu_groups=())
        self.pods[key] = pending
        self._pod_written(key)
        self.version += 1
        return pending

    def clocks_changed(self, groups: Iterable[str]) -> None:
        """A cycle wrote these pod groups' start, staleness or eviction times into ``pod_groups``."""
        for key in groups:
            self._group_written(key)
        self.version += 1
