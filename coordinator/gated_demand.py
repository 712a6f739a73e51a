"""What gated pods ask of their queues: the demand the fair-share division counts for them.

KAI's queue-admission design counts gated demand in a queue's requested resources exactly as it
counts pending demand, so that gating a queue's backlog changes no fair share: without it, a
queue whose pods wait at the gate would look as if it asked for less, and its fair share (the
room it may reclaim, its place in the queue order) would shrink for as long as they wait. The
pods themselves stay out of every session (``ClusterModel.gated``): only the division sees their
demand, never allocation, a victim search, or a queue's allocated sums.

Which gated pods count: this scheduler's pending pods whose only gate is kai-ray's, in a PodGroup
that exists. Those are the pods the admission step may let in, so their demand is real to this
scheduler. A pod that another gate holds waits for an owner this scheduler knows nothing of, and
may wait for good; KAI's design does not say whether it counts, and kai-ray leaves it out, so
that a third party's gate cannot raise a queue's share (and what it may take from other queues)
for pods no one here can run (docs/admission-gating.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from coordinator.gpu_request import requested_gpus
from kai_ray import labels as L
from kai_ray.model import Pod, PodGroup, PodState
from kai_ray.model.fairshare import Array

Quota = tuple[float, float, float]  # gpu, cpu, memory


def held_by_us_alone(pod: Pod) -> bool:
    """The pod's gates are kai-ray's own and no other's: the admission step decides when it goes."""
    return bool(pod.scheduling_gates) and all(gate == L.ADMISSION_GATE for gate in pod.scheduling_gates)


def gated_request(pod: Pod) -> Quota:
    """What a gated pod asks of its queue, as a pending pod's request counts (``requested_gpus``:
    whole GPUs, fractions, MIG instances as their profiles' GPUs; a GPU-memory request asks none
    until a node is chosen). The devices of its DRA claims are not resolved while it is gated."""
    return (requested_gpus(pod), pod.requests.cpu, pod.requests.memory)


def gated_demand(gated: Iterable[Pod], groups: Mapping[str, PodGroup], scheduler_name: str) -> dict[str, Quota]:
    """Queue name -> the summed requests of the gated pods that count in its fair-share request."""
    demand: dict[str, list[float]] = {}
    for pod in gated:
        # Pending only: a gated pod being deleted is releasing, which no queue's request counts.
        if pod.scheduler_name != scheduler_name or pod.state is not PodState.PENDING or not held_by_us_alone(pod):
            continue
        group = groups.get(f"{pod.namespace}/{pod.pod_group}") if pod.pod_group else None
        if group is None:  # no job to count it in, as for a pending pod without its PodGroup
            continue
        gpu, cpu, memory = gated_request(pod)
        row = demand.setdefault(group.queue, [0.0, 0.0, 0.0])
        row[0] += gpu
        row[1] += cpu
        row[2] += memory
    return {queue: (row[0], row[1], row[2]) for queue, row in demand.items()}


def add_gated_demand(request: Array, index: Mapping[str, int], demand: Mapping[str, Quota]) -> None:
    """Add each queue's gated demand to its own row of ``request`` (per queue, before the roll-up
    that carries it to every ancestor), where a pending job of that queue would add its own."""
    for queue, amount in demand.items():
        row = index.get(queue)
        if row is not None:
            request[row] += np.asarray(amount)
