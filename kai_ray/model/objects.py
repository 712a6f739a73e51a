"""The cluster objects kai-ray schedules with, already validated and defaulted.

These records are what the snapshot loader and the Kubernetes adapter produce and
what the coordinator and shards consume. They are frozen: a change in the cluster is
a new record (a delta), never an in-place edit.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kai_ray.model.dra import PodClaim
from kai_ray.model.mig import MigMode
from kai_ray.model.resources import ZERO, GpuShare, ResourceVector
from kai_ray.model.topology import TopologyConstraint

NO_LABELS: Mapping[str, str] = MappingProxyType({})
UNLIMITED = -1.0


class PodState(enum.StrEnum):
    """A pod's scheduling state, in KAI's vocabulary."""

    PENDING = "Pending"  # waiting for a placement
    PIPELINED = "Pipelined"  # placed on capacity that frees when releasing pods finish
    BINDING = "Binding"  # placed on free capacity, bind in flight
    RUNNING = "Running"  # bound to a node and holding its resources
    RELEASING = "Releasing"  # terminating: still holds resources that will free up
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def holds_node(self) -> bool:
        """Whether the pod occupies capacity on a node right now."""
        return self in (PodState.BINDING, PodState.RUNNING, PodState.RELEASING)

    @property
    def is_active_allocated(self) -> bool:
        """KAI's 'active allocated': placed and not on its way out."""
        return self in (PodState.BINDING, PodState.RUNNING, PodState.PIPELINED)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One node-affinity expression: ``key operator values``."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    field: bool = False  # a matchFields entry (only metadata.name exists)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        present = node_name if self.field else labels.get(self.key)
        op = self.operator
        if op == "In":
            return present is not None and present in self.values
        if op == "NotIn":
            return present is None or present not in self.values
        if op == "Exists":
            return present is not None
        if op == "DoesNotExist":
            return present is None
        if op in ("Gt", "Lt") and present is not None:
            try:
                have, want = int(present), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if op == "Gt" else have < want
        return False


# A required node affinity: the node must match at least one term; a term is an AND.
AffinityTerm = tuple[SelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: ResourceVector
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    gpu_memory_mib: float = 100.0  # per device, floored to a multiple of 100 (KAI)
    # The node's MIG mode as its reader worked it out (with the configured MIG-node label key, and
    # seeing MIG profiles listed with a count of zero, which ``allocatable`` drops). None for a
    # node built in code: placement then works it out from ``labels`` and ``allocatable``.
    mig_mode: MigMode | None = None

    @property
    def gpu_count(self) -> int:
        return int(self.allocatable.gpu)


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    scheduler_name: str = "kai-scheduler"
    state: PodState = PodState.PENDING
    node: str | None = None  # where it runs, or where it is pipelined
    requests: ResourceVector = ZERO  # whole GPUs in .gpu, pods=1
    gpu_share: GpuShare | None = None
    gpu_groups: tuple[str, ...] = ()  # shared GPUs a placed fraction sits on
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    annotations: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    node_selector: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    affinity: tuple[AffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    created: float = 0.0  # epoch seconds
    pod_group: str | None = None  # name of its PodGroup (same namespace)
    queue_label: str | None = None
    subgroup: str | None = None
    task_priority: int | None = None
    is_leader: bool = False  # kubeflow master/launcher or ray head: placed first
    priority_class_name: str | None = None
    resource_claims: tuple[PodClaim, ...] = ()  # DRA: spec.resourceClaims, resolved names where known
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates: names; no scheduler may bind it while any is left
    # ``pod_group`` names a gang of the Kubernetes Workload API (spec.schedulingGroup.podGroupName,
    # a scheduling.k8s.io PodGroup), not one of KAI's PodGroups: no pod grouper makes it a group.
    workload_gang: bool = False
    # The annotation that makes this a legacy MIG pod (a MIG profile named in an annotation with a
    # whole number, how MIG was once asked for), or None. KAI schedules no such pod.
    legacy_mig: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gated(self) -> bool:
        """Held back from every scheduler: gated and not bound (the API server refuses a binding
        while any gate is left, and a bound pod cannot have gated)."""
        return bool(self.scheduling_gates) and self.node is None

    @property
    def is_fractional(self) -> bool:
        return self.gpu_share is not None


@dataclass(frozen=True, slots=True)
class SubGroup:
    """One entry of ``spec.subGroups``: a leaf gathers pods (``minMember`` of them); a sub-group
    that other sub-groups name as ``parent`` needs ``minSubGroup`` of its children (all when unset)."""

    name: str
    min_member: int
    parent: str | None = None
    min_sub_group: int | None = None
    topology: TopologyConstraint | None = None


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    queue: str
    priority: int
    preemptible: bool
    min_member: int = 1
    sub_groups: tuple[SubGroup, ...] = ()
    priority_class_name: str | None = None
    min_sub_group: int | None = None  # how many direct sub-groups must be satisfied (all when unset)
    topology: TopologyConstraint | None = None  # spec.topologyConstraint (None when it names no Topology)
    created: float = 0.0
    staleness_grace_seconds: float | None = None  # None: the scheduler default
    stale_since: float | None = None  # kai.scheduler/stale-podgroup-timestamp
    last_start: float | None = None  # kai.scheduler/last-start-timestamp
    uid: str = ""
    last_eviction: float | None = None  # kai.scheduler/last-eviction-timestamp
    preemption_delay_seconds: float | None = None  # spec.preemptionDelay: no evicting before it passed
    expected_runtime_seconds: float | None = None  # kai.scheduler/expected-runtime (beyond KAI)
    reservation_after_seconds: float | None = None  # kai-ray.io/reservation-after; negative: never
    # Non-preemptible up to minMember pods per pod set, preemptible beyond (then ``preemptible`` is
    # False: what is not surplus must never be taken). Never set on a group with a sub-group tree.
    semi_preemptible: bool = False
    # Set for a gang of the Kubernetes Workload API: what declared it, in words for pending
    # reasons and output ("scheduling.k8s.io PodGroup team/trainer-0 of Workload trainer, template
    # workers"). Such a group has no KAI PodGroup object to write status or clocks on.
    workload_api: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One resource of a queue in scheduler units (memory already in bytes)."""

    quota: float = 0.0  # deserved; -1 = everything requested
    over_quota_weight: float = 1.0
    limit: float = UNLIMITED  # max allowed; -1 = no limit


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    parent: str | None = None
    priority: int = 100
    gpu: QueueResource = field(default_factory=QueueResource)
    cpu: QueueResource = field(default_factory=QueueResource)
    memory: QueueResource = field(default_factory=QueueResource)
    created: float = 0.0
    preempt_min_runtime: float | None = None  # seconds
    reclaim_min_runtime: float | None = None
    display_name: str = ""  # spec.displayName (KAI's queue metrics label queues by it)

    def resource(self, name: str) -> QueueResource:
        if name == "gpu":
            return self.gpu
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
