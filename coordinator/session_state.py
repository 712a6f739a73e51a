"""Opening a session: a snapshot becomes node arrays, jobs, tasks and queue shares.

Mirrors KAI's session open: nodes and every pod that holds capacity go into the node
table; pods of this scheduler are grouped into jobs; queue requests and allocations
are rolled up the tree; the fair share is divided over the capacity left after other
schedulers' pods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from coordinator.fairshare import QueueSpec, QueueTree, divide
from coordinator.jobs import DEFAULT_SUBGROUP, Job, PodSet, Status, Task, task_status
from coordinator.queue_state import QueueState
from kai_ray.io.config import SchedulerConfig
from kai_ray.model import ClusterSnapshot, Pod, PodGroup, Queue
from shards.node_table import Kind, NodeTable
from shards.placement import PlacementPolicy, Placer, share_mib
from shards.shapes import GPU, ResourceSchema, TaskShape

Quota = tuple[float, float, float]


@dataclass(slots=True)
class SessionState:
    config: SchedulerConfig
    now: float
    table: NodeTable
    placer: Placer
    queues: QueueState
    jobs: dict[str, Job]
    tasks: dict[str, Task]
    jobs_by_task: dict[str, Job]
    all_pods: list[Pod]
    pod_notes: dict[str, str] = field(default_factory=dict)  # why a pod is not schedulable at all
    min_gpu_memory: float = 100.0
    last_start: dict[str, float] = field(default_factory=dict)

    def requested_quota(self, task: Task) -> Quota:
        """What a pending pod asks of its queue (KAI converts GPU memory with the smallest GPU)."""
        pod = task.pod
        gpu = pod.requests.gpu
        if pod.gpu_share is not None:
            gpu += pod.gpu_share.quota_gpus(self.min_gpu_memory)
        return (gpu, pod.requests.cpu, pod.requests.memory)

    def accepted_quota(self, task: Task, row: int) -> Quota:
        """What a placed pod holds of its queue, with its fraction measured on its node."""
        pod = task.pod
        gpu = pod.requests.gpu
        share = pod.gpu_share
        if share is not None:
            if share.fraction is not None:
                portion = share.fraction
            else:
                assert share.memory_mib is not None
                portion = math.ceil(share.memory_mib / max(float(self.table.gpu_mem[row]), 1.0) * 100) / 100
            gpu += share.devices * portion
        return (gpu, pod.requests.cpu, pod.requests.memory)

    def job_request(self, job: Job, real: bool = False) -> np.ndarray:
        total = np.zeros(3)
        for task in job.tasks_to_allocate(real):
            total += self.requested_quota(task)
        return total

    def job_allocated(self, job: Job) -> np.ndarray:
        total = np.zeros(3)
        for task in job.tasks:
            if task.status.active_allocated:
                total += task.accepted
        return total


def open_session(snapshot: ClusterSnapshot, config: SchedulerConfig, now: float) -> SessionState:
    ours = [p for p in snapshot.pods if p.scheduler_name == config.schedulerName]
    schema = ResourceSchema.covering([n.allocatable for n in snapshot.nodes] + [p.requests for p in snapshot.pods])
    table = NodeTable(schema, sorted(snapshot.nodes, key=lambda n: n.name))
    gpu_mems = [n.gpu_memory_mib for n in snapshot.nodes if n.allocatable.gpu > 0]
    min_gpu_memory = min(gpu_mems) if gpu_mems else 100.0
    placement = config.placementStrategy
    placer = Placer(table, PlacementPolicy(placement.gpu, placement.cpu, placement.gpu_device))
    tasks: dict[str, Task] = {}
    for pod in ours:
        status = task_status(pod)
        tasks[pod.key] = Task(pod, TaskShape.of_pod(pod), status, pod.node, pod.gpu_groups,
                              original_status=status, original_node=pod.node)
    state = SessionState(
        config=config, now=now, table=table, placer=placer, queues=_empty_queues(), jobs={}, tasks=tasks,
        jobs_by_task={}, all_pods=list(snapshot.pods), min_gpu_memory=min_gpu_memory,
    )
    _hold_placed_pods(state, snapshot.pods)
    _build_jobs(state, snapshot.pod_groups, ours)
    state.queues = _queue_state(state, snapshot.queues, snapshot.pods)
    return state


def _empty_queues() -> QueueState:
    tree = QueueTree.build([])
    empty = np.zeros((0, 3))
    return QueueState(tree, empty, empty, empty.copy(), empty.copy(), np.zeros(3))


def _hold_placed_pods(state: SessionState, pods: Iterable[Pod]) -> None:
    table = state.table
    kinds = {Status.RUNNING: Kind.ACTIVE, Status.ALLOCATED: Kind.ACTIVE, Status.RELEASING: Kind.RELEASING,
             Status.PIPELINED: Kind.PIPELINED}
    for pod in pods:
        status = task_status(pod)
        kind = kinds.get(status)
        if kind is None or pod.node is None:
            continue
        row = table.index.get(pod.node)
        if row is None:
            state.pod_notes.setdefault(pod.key, f"its node {pod.node} is not in the cluster")
            continue
        vector = table.schema.vector(pod.requests)
        shares: list[tuple[str, int]] = []
        if pod.gpu_share is not None:
            vector[GPU] = 0.0
            mib = int(share_mib(pod.gpu_share, table.gpu_mem[row:row + 1])[0])
            groups = pod.gpu_groups or tuple(f"{pod.name}-gpu{i}" for i in range(pod.gpu_share.devices))
            shares = [(g, mib) for g in groups]
        holding = table.hold(pod.key, row, kind, vector, shares)
        task = state.tasks.get(pod.key)
        if task is not None:
            task.holdings.append(holding)
            task.gpu_groups = tuple(g for g, _ in shares)
            task.accepted = state.accepted_quota(task, row)


def _build_jobs(state: SessionState, groups: Iterable[PodGroup], ours: list[Pod]) -> None:
    members: dict[str, list[Task]] = {}
    for pod in ours:
        if pod.pod_group:
            members.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(state.tasks[pod.key])
    known = set()
    for group in groups:
        known.add(group.key)
        tasks = members.get(group.key, [])
        if group.sub_groups:
            pod_sets = {s.name: PodSet(s.name, s.min_member) for s in group.sub_groups}
        else:
            pod_sets = {DEFAULT_SUBGROUP: PodSet(DEFAULT_SUBGROUP, max(group.min_member, 1))}
        for task in tasks:
            name = task.subgroup if task.subgroup in pod_sets else DEFAULT_SUBGROUP
            pod_sets.setdefault(name, PodSet(name, 0)).tasks.append(task)
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        state.jobs[group.key] = job
        for task in tasks:
            state.jobs_by_task[task.key] = job
        if group.last_start is not None:
            state.last_start[group.key] = group.last_start
    for key, tasks in members.items():
        if key not in known:
            for task in tasks:
                state.pod_notes[task.key] = f"PodGroup {key} does not exist"


def _queue_state(state: SessionState, queues: Iterable[Queue], pods: Iterable[Pod]) -> QueueState:
    specs = [
        QueueSpec(
            name=q.name, parent=q.parent, priority=q.priority, created=q.created,
            deserved=(q.gpu.quota, q.cpu.quota, q.memory.quota),
            over_quota_weight=(q.gpu.over_quota_weight, q.cpu.over_quota_weight, q.memory.over_quota_weight),
            limit=(q.gpu.limit, q.cpu.limit, q.memory.limit),
        )
        for q in queues
    ]
    tree = QueueTree.build(specs)
    n = len(tree)
    request, allocated, allocated_np = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    for job in state.jobs.values():
        leaf = tree.index.get(job.queue)
        if leaf is None:
            continue
        for task in job.tasks:
            if task.status.counts_as_queue_allocation:
                request[leaf] += task.accepted
                allocated[leaf] += task.accepted
                if not job.preemptible:
                    allocated_np[leaf] += task.accepted
            elif task.status is Status.PENDING:
                request[leaf] += state.requested_quota(task)
    request, allocated, allocated_np = tree.roll_up(request), tree.roll_up(allocated), tree.roll_up(allocated_np)
    total = _divisible_total(state, pods)
    division = divide(tree, total, request, None, state.config.kValue)
    return QueueState(tree, division.fair_share, request, allocated, allocated_np, total)


def _divisible_total(state: SessionState, pods: Iterable[Pod]) -> np.ndarray:
    """Ready nodes' allocatable minus what other schedulers' pods use (KAI's proportion total)."""
    table = state.table
    ready = table.ready & table.present
    from shards.shapes import CPU, MEMORY

    total = np.array([table.alloc[ready, GPU].sum(), table.alloc[ready, CPU].sum(), table.alloc[ready, MEMORY].sum()])
    for pod in pods:
        if pod.scheduler_name == state.config.schedulerName or pod.node is None:
            continue
        row = table.index.get(pod.node)
        if row is None or not ready[row] or not task_status(pod).active_used:
            continue
        gpu = pod.requests.gpu + (pod.gpu_share.quota_gpus(state.min_gpu_memory) if pod.gpu_share else 0.0)
        total -= (gpu, pod.requests.cpu, pod.requests.memory)
    return total
