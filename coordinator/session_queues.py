"""The queues of a session: their fair-share division over what the cluster can give, and the
sums (requested, allocated, non-preemptible allocated) rolled up the queue tree."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import numpy as np

from coordinator.fairshare import QueueSpec, QueueTree, divide, usage_array
from coordinator.gated_demand import add_gated_demand, gated_demand
from coordinator.gpu_request import requested_gpus
from coordinator.jobs import Job
from coordinator.queue_state import QueueState
from coordinator.semi_preemptible import core_quota_at_open
from coordinator.tasks import Status, Task, task_status
from kai_ray.model import ClusterSnapshot, Pod, Queue, mig_gpus

if TYPE_CHECKING:
    from coordinator.session import Quota, SessionState


def empty_queue_state() -> QueueState:
    tree = QueueTree.build([])
    empty = np.zeros((0, 3))
    return QueueState(tree, empty, empty, empty.copy(), empty.copy(), np.zeros(3))


def queue_spec(q: Queue) -> QueueSpec:
    """A Queue as the fair-share division reads it."""
    return QueueSpec(
        name=q.name,
        parent=q.parent,
        priority=q.priority,
        created=q.created,
        deserved=(q.gpu.quota, q.cpu.quota, q.memory.quota),
        over_quota_weight=(q.gpu.over_quota_weight, q.cpu.over_quota_weight, q.memory.over_quota_weight),
        limit=(q.gpu.limit, q.cpu.limit, q.memory.limit),
    )


def queue_state_of(state: SessionState, snapshot: ClusterSnapshot, gated: Collection[Pod] = ()) -> QueueState:
    """The queues of a session opened on ``snapshot``; ``gated``, the pods a scheduling gate holds
    out of it, count in their queues' requests (``coordinator.gated_demand``)."""
    specs = [queue_spec(q) for q in snapshot.queues]
    tree = QueueTree.build(specs)
    n = len(tree)
    # Summed in plain floats per leaf (numpy's per-call cost would dominate), then rolled up.
    sums = [[0.0] * 9 for _ in range(n)]  # request, allocated, non-preemptible allocated
    for job in state.jobs.values():
        leaf = tree.index.get(job.queue)
        if leaf is None:
            continue
        add_queue_sums(sums[leaf], job, state.requested_quota)
    table_of = np.array(sums, dtype=np.float64).reshape(n, 9)
    if gated:
        groups = {g.key: g for g in snapshot.pod_groups}
        add_gated_demand(table_of[:, 0:3], tree.index, gated_demand(gated, groups, state.config.schedulerName))
    request, allocated, allocated_np = (tree.roll_up(table_of[:, k : k + 3].copy()) for k in (0, 3, 6))
    total = divisible_total(state, snapshot)
    usage = usage_array(tree, snapshot.queue_usage) if snapshot.queue_usage else None
    division = divide(tree, total, request, usage, state.config.kValue)
    return QueueState(tree, division.fair_share, request, allocated, allocated_np, total)


def add_queue_sums(row: list[float], job: Job, requested: Callable[[Task], Quota]) -> None:
    """Add a job's pods to its leaf queue's sums: what they request (placed or pending), what
    they hold, and what they hold without being preemptible (3 x gpu, cpu, memory): everything a
    non-preemptible job holds, the core of a semi-preemptible one."""
    for task in job.tasks:
        status = task.status
        if status.counts_as_queue_allocation:
            g, c, m = task.accepted
            row[0] += g
            row[1] += c
            row[2] += m
            row[3] += g
            row[4] += c
            row[5] += m
            if not job.preemptible and not job.semi_preemptible:
                row[6] += g
                row[7] += c
                row[8] += m
        elif status is Status.PENDING:
            g, c, m = requested(task)
            row[0] += g
            row[1] += c
            row[2] += m
    if job.semi_preemptible:  # only its core is non-preemptible
        g, c, m = core_quota_at_open(job)
        row[6] += g
        row[7] += c
        row[8] += m


def divisible_total(state: SessionState, snapshot: ClusterSnapshot) -> np.ndarray:
    """Ready nodes' allocatable (MIG instances as GPUs) minus what other schedulers' pods use
    (KAI's proportion total)."""
    ready = {n.name: n for n in snapshot.nodes if n.ready}
    total = np.zeros(3)
    for node in ready.values():
        allocatable = node.allocatable
        total += (allocatable.gpu + mig_gpus(allocatable.scalars), allocatable.cpu, allocatable.memory)
    for pod in snapshot.pods:
        if pod.scheduler_name == state.config.schedulerName or pod.node not in ready:
            continue
        if not task_status(pod).active_used:
            continue
        total -= (requested_gpus(pod), pod.requests.cpu, pod.requests.memory)
    total[0] += state.dra.gpu_devices  # DRA GPUs are GPUs of the cluster too (KAI)
    return total
