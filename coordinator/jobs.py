"""Jobs (pod groups) and tasks (pods) as one scheduling session sees and changes them.

Statuses follow KAI's: a task moves between PENDING, ALLOCATED (bind now), PIPELINED
(waits for releasing capacity), RUNNING and RELEASING inside a session; the session
never talks to Kubernetes, so every change here is virtual until decisions are emitted.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kai_ray.model import Pod, PodGroup, PodState
from shards.node_table import Holding
from shards.shapes import TaskShape

if TYPE_CHECKING:
    from coordinator.subgroups import SubGroupTree

DEFAULT_SUBGROUP = "default"
T = TypeVar("T")


class Status(enum.Enum):
    PENDING = "Pending"
    ALLOCATED = "Binding"
    PIPELINED = "Pipelined"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def active_allocated(self) -> bool:
        return self in (Status.ALLOCATED, Status.PIPELINED, Status.RUNNING)

    @property
    def active_used(self) -> bool:
        return self in (Status.ALLOCATED, Status.PIPELINED, Status.RUNNING, Status.RELEASING)

    @property
    def counts_as_queue_allocation(self) -> bool:
        """KAI's queue 'allocated' at session open (pipelined and releasing pods excluded)."""
        return self in (Status.ALLOCATED, Status.RUNNING)

    @property
    def alive(self) -> bool:
        return self in (Status.PENDING, Status.ALLOCATED, Status.PIPELINED, Status.RUNNING)


_FROM_POD_STATE = {
    PodState.PENDING: Status.PENDING,
    PodState.PIPELINED: Status.PIPELINED,
    PodState.BINDING: Status.ALLOCATED,
    PodState.RUNNING: Status.RUNNING,
    PodState.RELEASING: Status.RELEASING,
    PodState.SUCCEEDED: Status.SUCCEEDED,
    PodState.FAILED: Status.FAILED,
}


@dataclass(eq=False, slots=True)
class Task:
    pod: Pod
    shape: TaskShape
    status: Status
    node: str | None
    gpu_groups: tuple[str, ...] = ()
    holdings: list[Holding] = field(default_factory=list)
    evicted_in_session: bool = False  # KAI's "virtual" Releasing: may be re-placed (moved)
    original_status: Status = Status.PENDING
    original_node: str | None = None
    accepted: tuple[float, float, float] = (0.0, 0.0, 0.0)  # queue quota it holds: gpu, cpu, memory
    claims: tuple[Any, ...] = ()  # DRA claims this session allocated for it (dra_session.ClaimGrant)

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def subgroup(self) -> str:
        return self.pod.subgroup or DEFAULT_SUBGROUP

    def order_key(self) -> tuple[int, float, float, str]:
        """KAI's task order: leaders first, then higher task priority (labelled first), then age."""
        priority = -self.pod.task_priority if self.pod.task_priority is not None else math.inf
        return (0 if self.pod.is_leader else 1, priority, self.pod.created, self.pod.uid or self.pod.name)

    def should_allocate(self, real: bool) -> bool:
        """Pending tasks; in simulations also tasks evicted earlier in the same attempt."""
        return self.status is Status.PENDING or (
            not real and self.status is Status.RELEASING and self.evicted_in_session
        )


@dataclass(eq=False, slots=True)
class PodSet:
    """A sub-group (or the whole job when it has none) with its own gang minimum."""

    name: str
    min_available: int
    tasks: list[Task] = field(default_factory=list)

    def count(self, predicate: str) -> int:
        return sum(1 for t in self.tasks if getattr(t.status, predicate))

    @property
    def active_allocated(self) -> int:
        return self.count("active_allocated")

    @property
    def active_used(self) -> int:
        return self.count("active_used")

    @property
    def alive(self) -> int:
        return self.count("alive")

    def gang_satisfied(self) -> bool:
        return self.active_used >= self.min_available

    def order_key(self) -> tuple[int, float, str]:
        """KAI's subgrouporder: below minimum first, then lower allocated/minimum ratio."""
        active = self.active_allocated
        if active < self.min_available:
            return (0, 0.0, self.name)
        ratio = active / self.min_available if self.min_available else math.inf
        return (1, ratio, self.name)


@dataclass(eq=False, slots=True)
class Job:
    group: PodGroup
    queue: str
    pod_sets: dict[str, PodSet]
    preemptible: bool
    priority: int
    fit_errors: dict[str, str] = field(default_factory=dict)  # action -> why it could not place the job
    stale_since: float | None = None
    boost: int = 0  # aging: priority steps gained while waiting (``job_timers``; 0 unless configured)
    overrun: bool = False  # ran past its expected runtime (``job_timers``; only with a runtime policy)
    version: int = 0  # bumped whenever one of its tasks changes status (caches below key on it)
    cacheable: bool = True  # stand-ins for part of a job are not versioned: they never cache
    _cache: dict[object, tuple[int, object]] = field(default_factory=dict)
    tree: SubGroupTree | None = None  # sub-group tree and topology constraints (coordinator/subgroups.py)

    def cached(self, key: object, compute: Callable[[], T]) -> T:
        if not self.cacheable:
            return compute()
        hit = self._cache.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1]  # type: ignore[return-value]
        value = compute()
        self._cache[key] = (self.version, value)
        return value

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def tasks(self) -> list[Task]:
        return [t for ps in self.pod_sets.values() for t in ps.tasks]

    def elastic_state(self) -> int:
        """0 below its minimum, 1 exactly at it, 2 above it (KAI's elastic job order)."""
        return self.cached("elastic", self._elastic_state)

    def _elastic_state(self) -> int:
        at_min = True
        for ps in self.pod_sets.values():
            active = ps.active_allocated
            if active < ps.min_available:
                return 0
            if active > ps.min_available:
                at_min = False
        return 1 if at_min else 2

    def order_key(self) -> tuple[bool, int, int, float, str]:
        """KAI's job order inside a queue: priority, elastic state, age, then uid/name. Overrun jobs
        go last (so first as victims) and aging adds to the priority; both are off by default."""
        return (
            self.overrun,
            -(self.priority + self.boost),
            self.elastic_state(),
            self.group.created,
            self.group.uid or self.key,
        )

    def has_pending(self) -> bool:
        return self.cached("has_pending", lambda: any(t.status is Status.PENDING for t in self.tasks))

    def ready_for_scheduling(self) -> bool:
        if self.tree is not None and not self.tree.flat:
            return self.cached("ready", self.tree.root.ready)
        return self.cached("ready", lambda: all(ps.alive >= ps.min_available for ps in self.pod_sets.values()))

    def gang_satisfied(self) -> bool:
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import used

            tree = self.tree
            return self.cached("gang", lambda: tree.root.met(used))
        return self.cached("gang", lambda: all(ps.gang_satisfied() for ps in self.pod_sets.values()))

    def active_used(self) -> int:
        return self.cached("active_used", lambda: sum(1 for t in self.tasks if t.status.active_used))

    def active_allocated(self) -> int:
        return self.cached("active_allocated", lambda: sum(1 for t in self.tasks if t.status.active_allocated))

    def is_stale(self) -> bool:
        tasks = self.tasks
        if any(t.status is Status.SUCCEEDED for t in tasks):
            return False
        if not any(t.status.active_used for t in tasks):
            return False
        return not self.gang_satisfied()

    def should_pipeline(self) -> bool:
        """KAI: a pod set with a pipelined pod and too few others allocated pipelines the whole job."""
        for ps in self.pod_sets.values():
            pipelined = any(t.status is Status.PIPELINED for t in ps.tasks)
            others = sum(1 for t in ps.tasks if t.status.active_allocated and t.status is not Status.PIPELINED)
            if pipelined and others < ps.min_available:
                return True
        return False

    def tasks_to_allocate(self, real: bool) -> list[Task]:
        """KAI's GetTasksToAllocate: the gang's missing pods, or one more pod of an elastic job."""
        return self.cached(("to_allocate", real), lambda: self._tasks_to_allocate(real))

    def _tasks_to_allocate(self, real: bool) -> list[Task]:
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import collect

            return collect(self.tree, real)
        sets = sorted(self.pod_sets.values(), key=PodSet.order_key)
        unsatisfied = sum(1 for ps in sets if ps.active_allocated < ps.min_available)
        max_sets = unsatisfied if unsatisfied else 1
        chosen: list[Task] = []
        used_sets = 0
        for ps in sets:
            if used_sets >= max_sets:
                break
            candidates = sorted((t for t in ps.tasks if t.should_allocate(real)), key=Task.order_key)
            if not candidates:
                continue
            active = ps.active_allocated
            wanted = ps.min_available - active if active < ps.min_available else min(len(candidates), 1)
            chosen.extend(candidates[:wanted])
            used_sets += 1
        return chosen

    def tasks_to_evict(self) -> tuple[list[Task], bool]:
        """KAI's GetTasksToEvict: one surplus pod of an elastic job, else the whole gang;
        plus whether the job keeps other allocated pods after that."""
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import evictable

            picked = evictable(self.tree)
            return picked, len(picked) < self.active_allocated()
        # Only pod sets with something allocated can give pods back: an empty optional sub-group
        # (minimum 0) sorts first here, and choosing it would offer no victim while still
        # reporting more to come, so the victims queue would offer the same job forever.
        sets = sorted((ps for ps in self.pod_sets.values() if ps.active_allocated), key=PodSet.order_key, reverse=True)
        surplus = any(ps.active_allocated > ps.min_available for ps in self.pod_sets.values())
        max_sets = 1 if surplus else len(sets)
        chosen: list[Task] = []
        for ps in sets[:max_sets]:
            active = [t for t in ps.tasks if t.status.active_allocated]
            active.sort(key=Task.order_key, reverse=True)
            take = 1 if len(active) > ps.min_available else len(active)
            chosen.extend(active[:take])
        return chosen, len(chosen) < self.active_allocated()


def task_status(pod: Pod) -> Status:
    return _FROM_POD_STATE[pod.state]
