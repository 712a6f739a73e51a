"""The session cache's tasks: one per pod of ours, kept while its pod record is the same object.

The coordinator's cluster model hands out the same pod record until the pod changes, so a task
made from it is kept from session to session and only reset to what the record says (the last
session may have moved it). A changed record makes a new task; a pod of another scheduler is
no task, but what it uses on a ready node is kept too, since the fair share divides what is left.
Which pods each pod group has is kept here as well: a changed member makes its group's job
dirty, and the session cache (``session_cache.py``) makes that job again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from coordinator.gpu_request import requested_gpus
from coordinator.node_facts import NodeFacts
from coordinator.session import accepted_on
from coordinator.tasks import PlacedHolds, Status, Task, task_status
from kai_ray.model import Pod
from placement.shapes import TaskShape


@dataclass(slots=True)
class _Made:
    """A task and the pod record it was made from."""

    pod: Pod
    task: Task
    accepted: tuple[float, float, float]


class KeptTasks:
    def __init__(self, scheduler_name: str, nodes: NodeFacts) -> None:
        self.scheduler_name = scheduler_name
        self.nodes = nodes  # the session cache's, brought up to date before pods are read
        self.made: dict[str, _Made] = {}
        self.tasks: dict[str, Task] = {}  # the same tasks by pod key, handed to each session
        self.placed_holds = PlacedHolds()  # shared by every task made here, and the sessions opened
        self.members: dict[str, set[str]] = {}  # pod group -> its pods (keys)
        self.pending: dict[str, Task] = {}  # our pods that were pending when their record was read
        self.foreign: dict[str, tuple[float, float, float]] = {}  # other schedulers' pods on ready nodes: use
        self.shapes: dict[TaskShape, TaskShape] = {}
        self._shapes_by_parts: dict[tuple[object, ...], TaskShape] = {}  # see ``_shape_of``
        self.changes = 0  # counts tasks made and forgotten (so changes to who belongs where)
        self.forgotten: set[str] = set()  # pods whose task went since the caller last cleared this

    def read_all(self, pods: Mapping[str, Pod]) -> set[str]:
        """Every pod record read again, every task reset to its record. Returns the pod groups
        whose members changed."""
        dirty: set[str] = set()
        self.foreign = {}
        ours = 0
        for key, pod in pods.items():
            ours += self._read_pod(key, pod, dirty)
        if ours != len(self.made):  # some of our pods are gone
            for key in [k for k in self.made if k not in pods]:
                self._drop_task(key, dirty)
        for made in self.made.values():
            _reset(made)
        return dirty

    def read_changed(self, pods: Mapping[str, Pod], changed: Iterable[str]) -> set[str]:
        """The records of the ``changed`` pods read again (gone where ``pods`` has none). Returns
        the pod groups whose members changed."""
        dirty: set[str] = set()
        for key in changed:
            record = pods.get(key)
            if record is None:
                self.foreign.pop(key, None)
                self._drop_task(key, dirty)
            else:
                self._read_pod(key, record, dirty)
        return dirty

    def reset(self, tasks: Iterable[Task]) -> None:
        """These tasks (those kept here) go back to what their records say."""
        for task in tasks:
            kept = self.made.get(task.key)
            if kept is not None and kept.task is task:
                _reset(kept)

    def capacity(self) -> np.ndarray:
        """Ready nodes' allocatable GPU, CPU and memory, less what other schedulers' pods use."""
        total = list(self.nodes.ready_total)
        for gpu, cpu, memory in self.foreign.values():
            total[0] -= gpu
            total[1] -= cpu
            total[2] -= memory
        return np.array(total)

    def _read_pod(self, key: str, pod: Pod, dirty: set[str]) -> bool:
        """Take in one pod record: ours becomes (or stays) a task, another scheduler's counts
        against the capacity the fair share divides when it holds a ready node. Whether it is ours."""
        if pod.scheduler_name != self.scheduler_name:
            self._drop_task(key, dirty)
            if pod.node in self.nodes.ready and task_status(pod).active_used:
                self.foreign[key] = (requested_gpus(pod), pod.requests.cpu, pod.requests.memory)
            else:
                self.foreign.pop(key, None)
            return False
        self.foreign.pop(key, None)
        known = self.made.get(key)
        if known is not None and known.pod is pod:
            return True
        if known is not None:
            self._forget(key, known, dirty)
        self.made[key] = fresh = self._new_task(pod, known)
        self.tasks[key] = fresh.task
        self.changes += 1
        if fresh.task.original_status is Status.PENDING:
            self.pending[key] = fresh.task
        if pod.pod_group:
            group = f"{pod.namespace}/{pod.pod_group}"
            self.members.setdefault(group, set()).add(key)
            dirty.add(group)
        return True

    def _drop_task(self, key: str, dirty: set[str]) -> None:
        known = self.made.pop(key, None)
        if known is not None:
            del self.tasks[key]
            self._forget(key, known, dirty)

    def _new_task(self, pod: Pod, known: _Made | None = None) -> _Made:
        status = task_status(pod)
        # A record copied for a change of state (a bind, say) keeps the shape's parts as they were.
        shape = known.task.shape if known is not None and _same_shape(known.pod, pod) else self._shape_of(pod)
        task = Task(
            pod,
            shape,
            status,
            pod.node,
            pod.gpu_groups,
            original_status=status,
            original_node=pod.node,
            placed=self.placed_holds,
        )
        if pod.node is not None and status.active_used:
            task.accepted = accepted_on(task, self.nodes.device_mib.get(pod.node, 100.0))
        return _Made(pod, task, task.accepted)

    def _shape_of(self, pod: Pod) -> TaskShape:
        """The pod's shape, one object per distinct shape. The readers give the pods of one
        workload the same request and toleration records, so a shape is found again by those
        parts; a new shape's hash walks every record nested in it (about 4 µs a pod, most of
        what reading 4,000 new pods into tasks cost)."""
        if pod.node_selector:  # each pod has its own selector mapping: no cheap key
            shape = TaskShape.of_pod(pod)
            return self.shapes.setdefault(shape, shape)
        parts = (pod.requests, pod.gpu_share, pod.affinity, pod.tolerations, pod.legacy_mig)
        found = self._shapes_by_parts.get(parts)
        if found is None:
            shape = TaskShape.of_pod(pod)
            found = self._shapes_by_parts[parts] = self.shapes.setdefault(shape, shape)
        return found

    def _forget(self, key: str, known: _Made, dirty: set[str]) -> None:
        self.changes += 1
        self.forgotten.add(key)
        pod = known.pod
        self.pending.pop(key, None)
        if pod.pod_group:
            group = f"{pod.namespace}/{pod.pod_group}"
            members = self.members.get(group)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.members[group]
            dirty.add(group)


def _same_shape(old: Pod, new: Pod) -> bool:
    """The fields ``TaskShape.of_pod`` reads are the very same objects (records copied for a
    change of state keep them), so the shape is the same."""
    return (
        old.requests is new.requests
        and old.gpu_share is new.gpu_share
        and old.node_selector is new.node_selector
        and old.affinity is new.affinity
        and old.tolerations is new.tolerations
        and old.legacy_mig == new.legacy_mig
    )


def _reset(made: _Made) -> None:
    """Whatever the last session did to the task, it starts from its pod record again."""
    task = made.task
    if task.status is not task.original_status:
        task.status = task.original_status
    task.node = task.original_node
    task.gpu_groups = made.pod.gpu_groups
    task.accepted = made.accepted
    task.forget_holdings()
    if task.evicted_in_session:
        task.evicted_in_session = False
    if task.claims:
        task.claims = ()
