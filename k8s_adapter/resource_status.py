"""PodGroup and Queue resource status, as KAI's podgroup and queue controllers write them.

A PodGroup's ``status.resourcesStatus``: ``requested`` sums the requests of its live pods
(pending or running), ``allocated`` those of its pods on a node (bound, running, terminating),
``allocatedNonPreemptible`` the allocated part when the group is non-preemptible (for a
semi-preemptible group, the part its first ``minMember`` pods of each sub-group hold, the core the
scheduler protects; KAI's design has the scheduler publish that amount for its controller to copy,
where kai-ray is both and writes it here). A Queue's
``status`` sums its own PodGroups' and its child queues' figures, and lists ``childQueues``.
Amounts are Kubernetes resource lists: ``cpu``, ``memory``, ``nvidia.com/gpu`` (fractions of a
shared GPU included, as KAI adds them) and any other extended resource a pod requests; GPU
memory requested through ``gpu-memory`` is ``run.ai/gpu.memory`` in MiB, as in KAI.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coordinator.semi_preemptible import protected_pods
from kai_ray.model import Node, Pod, PodGroup, PodState, Queue

GPU = "nvidia.com/gpu"
GPU_MEMORY = "run.ai/gpu.memory"
ResourceList = dict[str, str]
Amounts = dict[str, float]
LIVE = (PodState.PENDING, PodState.PIPELINED, PodState.BINDING, PodState.RUNNING, PodState.RELEASING)


@dataclass(slots=True)
class Figures:
    requested: Amounts = field(default_factory=lambda: defaultdict(float))
    allocated: Amounts = field(default_factory=lambda: defaultdict(float))
    allocated_np: Amounts = field(default_factory=lambda: defaultdict(float))

    def add(self, other: Figures) -> None:
        for mine, theirs in ((self.requested, other.requested), (self.allocated, other.allocated)):
            for name, value in theirs.items():
                mine[name] += value
        for name, value in other.allocated_np.items():
            self.allocated_np[name] += value

    def as_status(self) -> dict[str, ResourceList]:
        return {
            "allocated": resource_list(self.allocated),
            "allocatedNonPreemptible": resource_list(self.allocated_np),
            "requested": resource_list(self.requested),
        }


def quantity(name: str, value: float) -> str:
    """A canonical Kubernetes quantity: whole numbers plain, cpu and fractions in milli-units."""
    if name == "cpu":
        value /= 1000.0  # the model keeps millicores
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def resource_list(amounts: Mapping[str, float]) -> ResourceList:
    return {name: quantity(name, value) for name, value in sorted(amounts.items()) if value > 0}


def pod_amounts(pod: Pod, nodes: Mapping[str, Node], on_node: bool) -> Amounts:
    """What one pod asks for (``on_node``: what it holds where it runs, fractions as received)."""
    r = pod.requests
    amounts: Amounts = {"cpu": r.cpu, "memory": r.memory, GPU: r.gpu, **dict(r.scalars)}
    share = pod.gpu_share
    if share is not None:
        if share.fraction is not None:
            amounts[GPU] += share.devices * share.fraction
        elif on_node and pod.node is not None and pod.node in nodes:
            amounts[GPU] += share.quota_gpus(nodes[pod.node].gpu_memory_mib)
        elif not on_node:
            amounts[GPU_MEMORY] = float(share.devices * (share.memory_mib or 0))
    return amounts


def pod_group_figures(
    groups: Mapping[str, PodGroup], pods: Iterable[tuple[Pod, str]], nodes: Mapping[str, Node]
) -> dict[str, Figures]:
    """Per PodGroup key: ``pods`` are (pod, its group's key) for the scheduler's pods."""
    out: dict[str, Figures] = {key: Figures() for key in groups}
    semi: dict[str, list[Pod]] = {}  # semi-preemptible groups' pods: their core is worked out below
    for pod, key in pods:
        figures = out.get(key)
        if figures is None or pod.state not in LIVE:
            continue
        for name, value in pod_amounts(pod, nodes, on_node=False).items():
            figures.requested[name] += value
        if _holds(pod):
            held = pod_amounts(pod, nodes, on_node=True)
            for name, value in held.items():
                figures.allocated[name] += value
                if not groups[key].preemptible and not groups[key].semi_preemptible:
                    figures.allocated_np[name] += value
            if groups[key].semi_preemptible:
                semi.setdefault(key, []).append(pod)
    for key, members in semi.items():
        for pod in protected_pods(groups[key], members, _holds):
            for name, value in pod_amounts(pod, nodes, on_node=True).items():
                out[key].allocated_np[name] += value
    return out


def _holds(pod: Pod) -> bool:
    return pod.state in (PodState.BINDING, PodState.RUNNING, PodState.RELEASING)


def queue_status(
    queues: Mapping[str, Queue], groups: Mapping[str, PodGroup], figures: Mapping[str, Figures]
) -> dict[str, dict[str, object]]:
    """Per queue: its subtree's figures and its children (a queue cycle is cut where it closes)."""
    children: dict[str, list[str]] = defaultdict(list)
    for name, queue in queues.items():
        if queue.parent:
            children[queue.parent].append(name)
    own: dict[str, Figures] = defaultdict(Figures)
    for key, group in groups.items():
        if key in figures:
            own[group.queue].add(figures[key])
    totals: dict[str, Figures] = {}

    def total(name: str, path: frozenset[str]) -> Figures:
        if name in totals:
            return totals[name]
        result = Figures()
        result.add(own.get(name, Figures()))
        for child in children.get(name, []):
            if child not in path:
                result.add(total(child, path | {child}))
        totals[name] = result
        return result

    return {
        name: {**total(name, frozenset({name})).as_status(), "childQueues": sorted(children.get(name, []))}
        for name in queues
    }
