"""Session state that lives across cycles: tasks, jobs and queue sums, changed by what changed.

A session opened from scratch turns every pod into a task and every pod group into a job, and
sums every queue's requests and allocations, each cycle. The coordinator's cluster model hands
out the same pod and pod-group records until they change, so this cache keeps the tasks and
jobs made from them: a pod whose record is the same object keeps its task (reset to what the
record says, since the last session may have moved it), a job whose group and members are the
same keeps its job, and a job's contribution to its queue's sums is kept with it. Only new or
changed records cost a task, a job or a sum. The fair share is divided again each cycle (a
division over the queue tree is cheap); the cluster totals it divides are summed in the same
single pass over the pods that finds what changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from coordinator.cluster_model import ClusterModel
from coordinator.fairshare import QueueTree, divide, usage_array
from coordinator.job_timers import apply_timers
from coordinator.jobs import Job, PodSet
from coordinator.min_runtime import MinRuntimes
from coordinator.queue_state import QueueState
from coordinator.session import (
    SessionState,
    accepted_on,
    attach_placed_pods,
    make_placer,
)
from coordinator.session_queues import add_queue_sums, queue_spec
from coordinator.subgroups import build_tree, leaf_pod_sets, needs_tree
from coordinator.tasks import DEFAULT_SUBGROUP, Task, task_status
from kai_ray.config import SchedulerConfig
from kai_ray.model import Pod, PodGroup
from shards.node_table import NodeTable
from shards.placement import Placer
from shards.shapes import TaskShape

Sums = tuple[float, float, float, float, float, float, float, float, float]  # request, allocated, allocated np


@dataclass(slots=True)
class _Made:
    """A task and the pod record it was made from."""

    pod: Pod
    task: Task
    accepted: tuple[float, float, float]


class SessionCache:
    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.made: dict[str, _Made] = {}  # our pods' tasks
        self.groups: dict[str, PodGroup] = {}  # the group record each job was made from
        self.jobs: dict[str, Job] = {}
        self.jobs_by_task: dict[str, Job] = {}
        self.members: dict[str, set[str]] = {}  # pod group -> its pods (keys)
        self.invalid: dict[str, dict[str, str]] = {}  # tree job -> its pods that name no leaf, and why
        self.sums: dict[str, Sums] = {}  # job -> its contribution to its queue's sums
        self.shapes: dict[TaskShape, TaskShape] = {}
        self.queues_version = -1
        self.tree = QueueTree.build([])
        self.min_gpu_memory = 100.0
        self.device_mib: dict[str, float] = {}
        self.ready: set[str] = set()  # ready nodes
        self.ready_total = [0.0, 0.0, 0.0]  # their allocatable GPU, CPU, memory
        self.nodes_seen: dict[str, object] = {}

    def open(self, model: ClusterModel, now: float, table: NodeTable, placer_type: type[Placer]) -> SessionState:
        config = self.config
        self._nodes(model)
        dirty, total = self._tasks(model)
        self._jobs(model, dirty)
        tasks_by_key = {key: made.task for key, made in self.made.items()}
        state = SessionState(
            config=config,
            now=now,
            table=table,
            placer=make_placer(placer_type, table, config),
            queues=self.queues(model, total),
            jobs=self.jobs,
            tasks=tasks_by_key,
            jobs_by_task=self.jobs_by_task,
            all_pods=dict(model.pods),  # as of the session's start
            min_gpu_memory=self.min_gpu_memory,
            placer_type=placer_type,
            unusable_queues=model.unusable_queues,
            topologies=dict(model.topologies),
        )
        for notes in self.invalid.values():
            state.pod_notes.update(notes)
        for key, group in self.groups.items():
            if group.last_start is not None:
                state.last_start[key] = group.last_start
        state.min_runtimes = MinRuntimes.of(
            model.queues.values(),
            config.defaultPreemptMinRuntime,
            config.defaultReclaimMinRuntime,
            config.reclaimResolveMethod,
        )
        if config.jobAging is not None:  # boosts are recomputed from scratch, as for a fresh session
            for job in self.jobs.values():
                job.boost = 0
        apply_timers(self.jobs, state.last_start, config, now)
        for key, members in self.members.items():
            if key not in self.jobs:
                for pod in members:
                    state.pod_notes[pod] = f"PodGroup {key} does not exist"
        if len(table):  # a table that already carries the cluster's usage: tasks learn their holds on it
            attach_placed_pods(state, state.all_pods.values(), apply=False)
        return state

    # ------------------------------------------------------------------ nodes
    def _nodes(self, model: ClusterModel) -> None:
        if self.nodes_seen.get("version") == model.nodes_version:
            return
        smallest = math.inf
        device_mib: dict[str, float] = {}
        ready: set[str] = set()
        gpu = cpu = memory = 0.0
        for name, node in model.nodes.items():  # one pass: this runs whenever any node changed
            allocatable, mib = node.allocatable, node.gpu_memory_mib
            device_mib[name] = mib
            if allocatable.gpu > 0 and mib < smallest:
                smallest = mib
            if node.ready:
                ready.add(name)
                gpu += allocatable.gpu
                cpu += allocatable.cpu
                memory += allocatable.memory
        min_gpu_memory = smallest if smallest != math.inf else 100.0
        if min_gpu_memory != self.min_gpu_memory:
            self.sums.clear()  # pending fractions of GPU memory count in the smallest GPU's units
        self.min_gpu_memory = min_gpu_memory
        self.device_mib, self.ready, self.ready_total = device_mib, ready, [gpu, cpu, memory]
        self.nodes_seen = {"version": model.nodes_version}

    # ------------------------------------------------------------------ tasks
    def _tasks(self, model: ClusterModel) -> tuple[set[str], np.ndarray]:
        """Tasks for our pods (kept where the record is the same), the jobs whose members
        changed, and the capacity the fair share divides (ready nodes less other schedulers' use)."""
        ours = self.config.schedulerName
        ready = self.ready
        total = list(self.ready_total)
        dirty: set[str] = set()
        seen = 0
        made = self.made
        for key, pod in model.pods.items():
            if pod.scheduler_name != ours:
                if pod.node in ready and task_status(pod).active_used:
                    share = pod.gpu_share.quota_gpus(self.min_gpu_memory) if pod.gpu_share else 0.0
                    total[0] -= pod.requests.gpu + share
                    total[1] -= pod.requests.cpu
                    total[2] -= pod.requests.memory
                continue
            seen += 1
            known = made.get(key)
            if known is not None and known.pod is pod:
                _reset(known)
                continue
            if known is not None:
                self._forget(key, known, dirty)
            made[key] = self._new_task(pod, known)
            if pod.pod_group:
                group = f"{pod.namespace}/{pod.pod_group}"
                self.members.setdefault(group, set()).add(key)
                dirty.add(group)
        if seen != len(made):  # some of our pods are gone
            present = {k for k, p in model.pods.items() if p.scheduler_name == ours}
            for key in [k for k in made if k not in present]:
                self._forget(key, made.pop(key), dirty)
        return dirty, np.array(total)

    def _new_task(self, pod: Pod, known: _Made | None = None) -> _Made:
        status = task_status(pod)
        if known is not None and _same_shape(known.pod, pod):  # e.g. a bind: only state and node changed
            shape = known.task.shape
        else:
            shape = TaskShape.of_pod(pod)
            shape = self.shapes.setdefault(shape, shape)
        task = Task(pod, shape, status, pod.node, pod.gpu_groups, original_status=status, original_node=pod.node)
        if pod.node is not None and status.active_used:
            task.accepted = accepted_on(task, self.device_mib.get(pod.node, 100.0))
        return _Made(pod, task, task.accepted)

    def _forget(self, key: str, known: _Made, dirty: set[str]) -> None:
        pod = known.pod
        if pod.pod_group:
            group = f"{pod.namespace}/{pod.pod_group}"
            members = self.members.get(group)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.members[group]
            dirty.add(group)
        self.jobs_by_task.pop(key, None)

    # ------------------------------------------------------------------ jobs
    def _jobs(self, model: ClusterModel, dirty: set[str]) -> None:
        groups = model.pod_groups
        for key in [k for k in self.jobs if k not in groups]:
            del self.jobs[key]
            self.groups.pop(key, None)
            self.sums.pop(key, None)
            self.invalid.pop(key, None)
            for pod in self.members.get(key, ()):
                self.jobs_by_task.pop(pod, None)
        for key, group in groups.items():
            if self.groups.get(key) is not group or key in dirty or key not in self.jobs:
                self._build(group)
            else:
                job = self.jobs[key]
                job.version += 1  # statuses were reset: cached answers are stale
                if job.fit_errors:
                    job.fit_errors = {}
                job.stale_since = group.stale_since
        for key in dirty:
            if key not in groups:
                self.sums.pop(key, None)

    def _build(self, group: PodGroup) -> None:
        self.invalid.pop(group.key, None)
        if needs_tree(group):
            self._build_tree(group)
            return
        if group.sub_groups:
            pod_sets = {s.name: PodSet(s.name, s.min_member, tracked=True) for s in group.sub_groups}
        else:
            pod_sets = {DEFAULT_SUBGROUP: PodSet(DEFAULT_SUBGROUP, max(group.min_member, 1), tracked=True)}
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        for pod_key in sorted(self.members.get(group.key, ())):
            task = self.made[pod_key].task
            name = task.subgroup if task.subgroup in pod_sets else DEFAULT_SUBGROUP
            pod_sets.setdefault(name, PodSet(name, 0, tracked=True)).add(task)
            self.jobs_by_task[pod_key] = job
        self.jobs[group.key] = job
        self.groups[group.key] = group
        self.sums.pop(group.key, None)

    def _build_tree(self, group: PodGroup) -> None:
        """A job with a sub-group tree or topology constraints, as ``session._build_tree_job``
        makes it; pods that name no leaf wait with KAI's reason."""
        members = sorted(self.members.get(group.key, ()))
        pod_sets, invalid = leaf_pod_sets(group, (self.made[k].task for k in members))
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        job.tree = build_tree(group, pod_sets)
        for pod_key in members:
            if pod_key in invalid:
                self.jobs_by_task.pop(pod_key, None)
            else:
                self.jobs_by_task[pod_key] = job
        if invalid:
            self.invalid[group.key] = invalid
        self.jobs[group.key] = job
        self.groups[group.key] = group
        self.sums.pop(group.key, None)

    # ------------------------------------------------------------------ queues
    def queues(self, model: ClusterModel, total: np.ndarray) -> QueueState:
        if self.queues_version != model.queues_version:
            self.tree = QueueTree.build([queue_spec(q) for q in model.queues.values()])
            self.queues_version = model.queues_version
        tree = self.tree
        sums = np.zeros((len(tree), 9))
        for key, job in self.jobs.items():
            leaf = tree.index.get(job.queue)
            if leaf is None:
                continue
            contribution = self.sums.get(key)
            if contribution is None:
                contribution = self.sums[key] = self._sums(job)
            sums[leaf] += contribution
        request, allocated, allocated_np = (tree.roll_up(sums[:, k : k + 3].copy()) for k in (0, 3, 6))
        usage = usage_array(tree, model.queue_usage) if model.queue_usage else None
        division = divide(tree, total, request, usage, self.config.kValue)
        return QueueState(tree, division.fair_share, request, allocated, allocated_np, total)

    def _sums(self, job: Job) -> Sums:
        """The job's contribution to its queue's sums; its tasks are as their pod records say."""
        row = [0.0] * 9
        add_queue_sums(row, job, self._requested)
        return (row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8])

    def _requested(self, task: Task) -> tuple[float, float, float]:
        pod = task.pod
        gpu = pod.requests.gpu + (pod.gpu_share.quota_gpus(self.min_gpu_memory) if pod.gpu_share else 0.0)
        return (gpu, pod.requests.cpu, pod.requests.memory)


def _same_shape(old: Pod, new: Pod) -> bool:
    """The fields ``TaskShape.of_pod`` reads are the very same objects (records copied for a
    change of state keep them), so the shape is the same."""
    return (
        old.requests is new.requests
        and old.gpu_share is new.gpu_share
        and old.node_selector is new.node_selector
        and old.affinity is new.affinity
        and old.tolerations is new.tolerations
    )


def _reset(made: _Made) -> None:
    """Whatever the last session did to the task, it starts from its pod record again."""
    task = made.task
    if task.status is not task.original_status:
        task.status = task.original_status
    task.node = task.original_node
    task.gpu_groups = made.pod.gpu_groups
    task.accepted = made.accepted
    if task.holdings:
        task.holdings = []
    if task.evicted_in_session:
        task.evicted_in_session = False
    if task.claims:
        task.claims = ()
