"""Tasks (pods) as one scheduling session sees and changes them, and their statuses.

Statuses follow KAI's: a task moves between PENDING, ALLOCATED (bind now), PIPELINED
(waits for releasing capacity), RUNNING and RELEASING inside a session; the session
never talks to Kubernetes, so every change here is virtual until decisions are emitted.
Each status change is counted in the task's pod set (``coordinator.jobs``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kai_ray.model import Pod, PodState
from placement.holdings import Holding
from placement.node_table import NodeTable
from placement.pod_holds import pod_hold
from placement.shapes import TaskShape

if TYPE_CHECKING:
    from coordinator.jobs import PodSet

DEFAULT_SUBGROUP = "default"


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


class Task:
    """One pod in a session. Its status is a property: every change is counted in its pod set,
    so a job's gang and elastic questions are answered from counters, not by walking its pods."""

    __slots__ = (
        "pod",
        "shape",
        "_status",
        "node",
        "gpu_groups",
        "_holdings",
        "_placed",
        "_generation",
        "_evicted",
        "original_status",
        "original_node",
        "accepted",
        "pod_set",
        "rank",
        "key",
        "claims",
    )

    def __init__(
        self,
        pod: Pod,
        shape: TaskShape,
        status: Status,
        node: str | None,
        gpu_groups: tuple[str, ...] = (),
        holdings: list[Holding] | None = None,
        evicted_in_session: bool = False,
        original_status: Status = Status.PENDING,
        original_node: str | None = None,
        accepted: tuple[float, float, float] = (0.0, 0.0, 0.0),
        placed: PlacedHolds | None = None,
    ) -> None:
        self.pod = pod
        self.shape = shape
        self._status = status
        self.node = node
        self.gpu_groups = gpu_groups
        self._holdings: list[Holding] = [] if holdings is None else holdings
        # The session's table for tasks whose usage is as their pod records say; ``_holdings`` is
        # what the task holds while ``_generation`` is that of ``_placed``, and worked out from the
        # pod record when first asked after the table moved.
        self._placed = PlacedHolds() if placed is None else placed
        self._generation = self._placed.generation
        self._evicted = evicted_in_session  # KAI's "virtual" Releasing: may be re-placed (moved)
        self.original_status = original_status
        self.original_node = original_node
        self.accepted = accepted  # queue quota it holds: gpu, cpu, memory
        self.pod_set: PodSet | None = None  # the job's own pod set, which counts this task
        self.rank = 0  # its place in that pod set's task order
        self.key = pod.key  # "namespace/name", worked out once
        self.claims: tuple[Any, ...] = ()  # DRA claims this session allocated for it (dra_session.ClaimGrant)

    def __repr__(self) -> str:
        return f"Task({self.key}, {self._status.value}, {self.node})"

    @property
    def status(self) -> Status:
        return self._status

    @status.setter
    def status(self, status: Status) -> None:
        if status is not self._status and self.pod_set is not None:
            self.pod_set.moved(self, self._status, status)
        self._status = status

    @property
    def holdings(self) -> list[Holding]:
        """What the task holds on the session's table (one entry per node it takes room on)."""
        placed = self._placed
        if self._generation != placed.generation:
            table = placed.table
            hold = pod_hold(table, self.pod) if table is not None else None
            self._holdings = [] if hold is None else [Holding(self.key, hold.row, hold.kind, hold.vector, hold.shares)]
            self._generation = placed.generation
        return self._holdings

    @holdings.setter
    def holdings(self, holdings: list[Holding]) -> None:
        self._holdings, self._generation = holdings, self._placed.generation

    def forget_holdings(self) -> None:
        if self._holdings or self._generation != self._placed.generation:
            self._holdings, self._generation = [], self._placed.generation

    @property
    def evicted_in_session(self) -> bool:
        return self._evicted

    @evicted_in_session.setter
    def evicted_in_session(self, evicted: bool) -> None:
        self._evicted = evicted
        if evicted and self.pod_set is not None:
            self.pod_set.may_allocate(self)

    @property
    def subgroup(self) -> str:
        return self.pod.subgroup or DEFAULT_SUBGROUP

    def order_key(self) -> tuple[int, float, float, str]:
        return pod_order_key(self.pod)

    def should_allocate(self, real: bool) -> bool:
        """Pending tasks; in simulations also tasks evicted earlier in the same attempt."""
        return self._status is Status.PENDING or (not real and self._status is Status.RELEASING and self._evicted)


def moved_in_session(tasks: Iterable[Task]) -> list[Task]:
    """The tasks whose status the session changed (placed, evicted, pipelined...): a pass over
    every task of the cluster, kept to attribute reads (the ``status`` property costs a call)."""
    return [task for task in tasks if task._status is not task.original_status]


class PlacedHolds:
    """The table on which a session's tasks hold what their pod records say, shared by all of
    them: moving the session onto another table (or off every table) is one change here, not a
    pass over every placed pod of the cluster; each task works its holdings out when asked."""

    __slots__ = ("table", "generation")

    def __init__(self) -> None:
        self.table: NodeTable | None = None
        self.generation = 0

    def move_to(self, table: NodeTable | None) -> None:
        """From now on, tasks not told otherwise hold on ``table`` as their records say (nothing,
        for None); whatever any task was told before is forgotten."""
        self.table = table
        self.generation += 1


def pod_order_key(pod: Pod) -> tuple[int, float, float, str]:
    """KAI's task order: leaders first, then higher task priority (labelled first), then age."""
    priority = -pod.task_priority if pod.task_priority is not None else math.inf
    return (0 if pod.is_leader else 1, priority, pod.created, pod.uid or pod.name)


def task_status(pod: Pod) -> Status:
    return _FROM_POD_STATE[pod.state]
