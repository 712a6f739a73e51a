"""Jobs (pod groups) and their pod sets as one scheduling session sees and changes them.

A pod set counts its tasks by status (``coordinator.tasks``), so a job's gang and elastic
questions are answered from counters, not by walking its pods.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from coordinator.tasks import Status, Task
from kai_ray.model import Pod, PodGroup

if TYPE_CHECKING:
    from coordinator.subgroups import SubGroupTree

T = TypeVar("T")


# Per status: counts as (active allocated, active used, alive, pending, pipelined, succeeded).
_FLAGS = {
    status: (
        int(status.active_allocated),
        int(status.active_used),
        int(status.alive),
        int(status is Status.PENDING),
        int(status is Status.PIPELINED),
        int(status is Status.SUCCEEDED),
    )
    for status in Status
}
_COUNTED = {status: tuple(i for i, flag in enumerate(flags) if flag) for status, flags in _FLAGS.items()}


class PodSet:
    """A sub-group (or the whole job when it has none) with its own gang minimum.

    The pod set a job is built with is *tracked*: its tasks point back at it and it keeps
    counts per status and a cursor into its task order, so "how many are allocated" and "the
    next pods to place" cost O(1) however many pods it has (an elastic job of 4,000 pods
    gets one more pod per turn). Stand-ins for part of a job (victim searches) count by
    walking their few tasks."""

    __slots__ = ("name", "min_available", "tasks", "tracked", "_counts", "_order", "_cursor")

    def __init__(self, name: str, min_available: int, tasks: list[Task] | None = None, tracked: bool = False) -> None:
        self.name = name
        self.min_available = min_available
        self.tasks: list[Task] = []
        self.tracked = tracked
        self._counts = [0, 0, 0, 0, 0, 0]
        self._order: list[Task] | None = None
        self._cursor = 0
        for task in tasks or ():
            self.add(task)

    def add(self, task: Task) -> None:
        self.tasks.append(task)
        if self.tracked:
            task.pod_set = self
            self._count(task.status, 1)
            self._order = None

    def _count(self, status: Status, sign: int) -> None:
        counts = self._counts
        for i in _COUNTED[status]:
            counts[i] += sign

    def moved(self, task: Task, old: Status, new: Status) -> None:
        counts = self._counts
        for i in _COUNTED[old]:
            counts[i] -= 1
        for i in _COUNTED[new]:
            counts[i] += 1
        if new is Status.PENDING or new is Status.RELEASING:
            self.may_allocate(task)

    def may_allocate(self, task: Task) -> None:
        """``task`` may be a candidate again: the cursor must not be past it."""
        if self._order is not None and task.rank < self._cursor:
            self._cursor = task.rank

    def counts(self) -> tuple[int, int, int, int, int, int]:
        """Active allocated, active used, alive, pending, pipelined, succeeded: in one go."""
        if self.tracked:
            c = self._counts
            return c[0], c[1], c[2], c[3], c[4], c[5]
        return (
            self._tally(0),
            self._tally(1),
            self._tally(2),
            self._tally(3),
            self._tally(4),
            self._tally(5),
        )

    def _tally(self, index: int) -> int:
        if self.tracked:
            return self._counts[index]
        return sum(_FLAGS[t.status][index] for t in self.tasks)

    @property
    def active_allocated(self) -> int:
        return self._tally(0)

    @property
    def active_used(self) -> int:
        return self._tally(1)

    @property
    def alive(self) -> int:
        return self._tally(2)

    @property
    def pending(self) -> int:
        return self._tally(3)

    @property
    def pipelined(self) -> int:
        return self._tally(4)

    @property
    def succeeded(self) -> int:
        return self._tally(5)

    def gang_satisfied(self) -> bool:
        return self.active_used >= self.min_available

    def order_key(self) -> tuple[int, float, str]:
        """KAI's subgrouporder: below minimum first, then lower allocated/minimum ratio."""
        active = self.active_allocated
        if active < self.min_available:
            return (0, 0.0, self.name)
        ratio = active / self.min_available if self.min_available else math.inf
        return (1, ratio, self.name)

    def in_task_order(self) -> list[Task]:
        """Every task of the set in KAI's task order (kept while the set's members stay the same)."""
        if not self.tracked:
            return sorted(self.tasks, key=Task.order_key)
        if self._order is None:
            self._order = sorted(self.tasks, key=Task.order_key)
            for rank, task in enumerate(self._order):
                task.rank = rank
            self._cursor = 0
        return self._order

    def candidates(self, wanted: int, real: bool) -> list[Task]:
        """The first ``wanted`` tasks in task order that may be placed."""
        if not self.tracked:
            ordered = sorted((t for t in self.tasks if t.should_allocate(real)), key=Task.order_key)
            return ordered[:wanted]
        order = self.in_task_order()
        i = self._cursor
        while i < len(order) and not order[i].should_allocate(False):  # skip what can never be a candidate
            i += 1
        self._cursor = i
        out: list[Task] = []
        for task in order[i:] if wanted else ():
            if task.should_allocate(real):
                out.append(task)
                if len(out) == wanted:
                    break
        return out


_INVERTED = bytes(range(255, -1, -1))


def missing_group_note(key: str, pod: Pod | None) -> str:
    """Why a pod naming PodGroup ``key`` waits when no such group exists: KAI's words, or, for a
    pod of a Kubernetes Workload API gang, the kind it names (KAI's design keeps such a pod
    pending, never scheduled alone)."""
    if pod is not None and pod.workload_gang:
        return f"the Workload API PodGroup {key} (scheduling.k8s.io) does not exist"
    return f"PodGroup {key} does not exist"


def descending(text: str) -> bytes:
    """A key that sorts strings in reverse: UTF-8 keeps code-point order, every byte inverted
    reverses it, and the final 0xff puts a string after every longer one it begins (no UTF-8
    byte inverts to 0xff but NUL, which names and UIDs never hold)."""
    return text.encode().translate(_INVERTED) + b"\xff"


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
    key: str = field(init=False)  # "namespace/name" of its pod group, worked out once
    # Its pods up to each pod set's minimum are not preemptible, those beyond are
    # (``coordinator.semi_preemptible``); ``preemptible`` is then False.
    semi_preemptible: bool = field(init=False)

    def __post_init__(self) -> None:
        self.key = self.group.key
        self.semi_preemptible = self.group.semi_preemptible

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
    def tasks(self) -> list[Task]:
        return [t for ps in self.pod_sets.values() for t in ps.tasks]

    def elastic_state(self) -> int:
        """0 below its minimum, 1 exactly at it, 2 above it (KAI's elastic job order)."""
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

    def victim_key(self) -> tuple[bool, int, int, float, bytes]:
        """``order_key`` reversed component by component (as victims, the job that would be
        scheduled last comes first), in values that compare natively: sorting thousands of
        running jobs compares these millions of times."""
        return (
            not self.overrun,
            self.priority + self.boost,
            -self.elastic_state(),
            -self.group.created,
            descending(self.group.uid or self.key),
        )

    def has_pending(self) -> bool:
        sets = self.pod_sets
        if len(sets) == 1:  # most jobs: asked several times per job and session
            (only,) = sets.values()
            return only.pending > 0
        return any(ps.pending for ps in sets.values())

    def ready_for_scheduling(self) -> bool:
        if self.tree is not None and not self.tree.flat:
            return self.cached("ready", self.tree.root.ready)
        sets = self.pod_sets
        if len(sets) == 1:
            (only,) = sets.values()
            return only.alive >= only.min_available
        return all(ps.alive >= ps.min_available for ps in sets.values())

    def gang_satisfied(self) -> bool:
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import used

            tree = self.tree
            return self.cached("gang", lambda: tree.root.met(used))
        return all(ps.gang_satisfied() for ps in self.pod_sets.values())

    def active_used(self) -> int:
        return sum(ps.active_used for ps in self.pod_sets.values())

    def active_allocated(self) -> int:
        return sum(ps.active_allocated for ps in self.pod_sets.values())

    def is_stale(self) -> bool:
        """Below its minimum with pods still running and none finished (asked of every job each
        cycle, so one pass over the pod sets' counts)."""
        used = 0
        for ps in self.pod_sets.values():
            counts = ps.counts()
            if counts[5]:  # succeeded
                return False
            used += counts[1]  # active used
        return used > 0 and not self.gang_satisfied()

    def should_pipeline(self) -> bool:
        """KAI: a pod set with a pipelined pod and too few others allocated pipelines the whole job."""
        for ps in self.pod_sets.values():
            pipelined = ps.pipelined
            if pipelined and ps.active_allocated - pipelined < ps.min_available:
                return True
        return False

    def tasks_to_allocate(self, real: bool) -> list[Task]:
        """KAI's GetTasksToAllocate: the gang's missing pods, or one more pod of an elastic job."""
        if real and self.cacheable and (self.tree is None or self.tree.flat):
            # What the job order worked out for a simulation (``real=False``) is the real answer
            # too when it holds only pending pods: a simulation may also take pods evicted
            # earlier in the attempt, and none was taken in their place (pod set by pod set,
            # the first pending pods in task order either way).
            hit = self._cache.get(("to_allocate", False))
            if hit is not None and hit[0] == self.version:
                simulated: list[Task] = hit[1]  # type: ignore[assignment]
                if all(task.status is Status.PENDING for task in simulated):
                    self._cache[("to_allocate", True)] = hit
                    return simulated
        return self.cached(("to_allocate", real), lambda: self._tasks_to_allocate(real))

    def _tasks_to_allocate(self, real: bool) -> list[Task]:
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import collect

            return collect(self.tree, real)
        if len(self.pod_sets) == 1:  # the rules below, for one pod set
            (only,) = self.pod_sets.values()
            active = only.active_allocated
            return only.candidates(only.min_available - active if active < only.min_available else 1, real)
        sets = sorted(self.pod_sets.values(), key=PodSet.order_key)
        unsatisfied = sum(1 for ps in sets if ps.active_allocated < ps.min_available)
        max_sets = unsatisfied if unsatisfied else 1
        chosen: list[Task] = []
        used_sets = 0
        for ps in sets:
            if used_sets >= max_sets:
                break
            active = ps.active_allocated
            wanted = ps.min_available - active if active < ps.min_available else 1
            candidates = ps.candidates(wanted, real)
            if not candidates:
                continue
            chosen.extend(candidates)
            used_sets += 1
        return chosen

    def tasks_to_evict(self, keep_minimum: bool = False) -> tuple[list[Task], bool]:
        """KAI's GetTasksToEvict: one surplus pod of an elastic job, else the whole gang;
        plus whether there is more to take after that. With ``keep_minimum`` the gang is never
        offered: nothing once the surplus is gone, and "more" only while surplus remains."""
        if self.tree is not None and not self.tree.flat:
            from coordinator.subgroups import evictable

            picked = evictable(self.tree, keep_minimum)
            return picked, bool(picked) if keep_minimum else len(picked) < self.active_allocated()
        # Only pod sets with something allocated can give pods back: an empty optional sub-group
        # (minimum 0) sorts first here, and choosing it would offer no victim while still
        # reporting more to come, so the victims queue would offer the same job forever.
        sets = sorted((ps for ps in self.pod_sets.values() if ps.active_allocated), key=PodSet.order_key, reverse=True)
        surplus = sum(max(ps.active_allocated - ps.min_available, 0) for ps in self.pod_sets.values())
        if keep_minimum and not surplus:
            return [], False
        max_sets = 1 if surplus else len(sets)
        chosen: list[Task] = []
        for ps in sets[:max_sets]:
            active = [t for t in ps.tasks if t.status.active_allocated]
            active.sort(key=Task.order_key, reverse=True)
            take = 1 if len(active) > ps.min_available else len(active)
            chosen.extend(active[:take])
        if keep_minimum:
            return chosen, surplus > len(chosen)
        return chosen, len(chosen) < self.active_allocated()
