"""A transaction over a session: allocate, pipeline and evict, with checkpoints and rollback.

Every operation changes three things together: the task's status, its holdings on the
node table, and its queue's allocation. Each operation pushes its own undo, so a
rollback restores the exact earlier state (the gang all-or-nothing rule relies on it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from coordinator.dra_session import evict_claims, grants_of, place_claims
from coordinator.jobs import Job
from coordinator.queue_state import QueueState
from coordinator.semi_preemptible import Quota, core_quota
from coordinator.tasks import Status, Task
from placement.dra_demand import ClaimDemand
from placement.holdings import Holding, Kind
from placement.node_table import NodeTable
from placement.placer import Choice

if TYPE_CHECKING:
    from coordinator.rounds import Pick

Undo = Callable[[], None]


@dataclass(slots=True, eq=False)
class Eviction:
    task: Task
    action: str
    preemptor: str | None


class PickSource(Protocol):
    """Where stream placements come from (``coordinator.rounds.RoundPlacer``)."""

    def give_back(self, pick: Pick) -> None: ...

    def pipeline(self, pick: Pick, pipelined: bool = True) -> None: ...

    def interfering(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class _Reversal:
    """What takes one eviction of this statement back, and the node whose hold it restores
    (None for a pod that held nothing but releasing capacity)."""

    node: int | None
    undo: Undo


@dataclass(slots=True)
class Statement:
    table: NodeTable
    queues: QueueState
    jobs_by_task: dict[str, Job]
    undo_log: list[Undo] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    source: PickSource | None = None  # allocate's placements come from the shards' streams
    picks: dict[str, Pick] = field(default_factory=dict)  # task -> its stream placement this session
    _evicted: dict[str, list[_Reversal]] = field(default_factory=dict)  # task -> its evictions here
    # Jobs whose tasks changed status (done or undone) since the last ``take_changed``: what a
    # victim pool re-sorts after a commit instead of every running job of the cluster.
    changed: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)  # every job changed in this session, never taken

    def checkpoint(self) -> int:
        return len(self.undo_log)

    def rollback(self, checkpoint: int = 0) -> None:
        undo_log = self.undo_log
        if len(undo_log) <= checkpoint:
            return
        with self.table.refreshed_once():  # nothing reads the table until every step is undone
            while len(undo_log) > checkpoint:
                undo_log.pop()()

    def take_changed(self) -> set[str]:
        """The keys of the jobs changed since the last call, and a fresh start."""
        changed, self.changed = self.changed, set()
        return changed

    def _touch(self, job: Job) -> None:
        job.version += 1
        self.changed.add(job.key)
        self.touched.add(job.key)

    def move_to(self, table: NodeTable) -> None:
        """Carry on over another table: the session moved onto every node's row, where what
        this statement placed is held already. Only between operations: nothing to roll back."""
        assert not self.undo_log, "a statement moves only when committed"
        self.table = table
        self.source = None  # allocate after this point places on the table itself

    def commit(self) -> None:
        """Keep everything done so far; later rollbacks cannot go behind this point."""
        self.undo_log.clear()
        self._evicted.clear()

    # ---------------------------------------------------------- operations
    def place(
        self, task: Task, choice: Choice, accepted: tuple[float, float, float], claims: ClaimDemand | None = None
    ) -> None:
        """Allocate (bind now) or pipeline ``task`` as ``choice`` says; ``claims`` are the pod's
        ResourceClaims as they stood when the choice was made (allocated on ``choice.devices``)."""
        kind = Kind.PIPELINED if choice.pipelined else Kind.ACTIVE
        status = Status.PIPELINED if choice.pipelined else Status.ALLOCATED
        job = self.jobs_by_task[task.key]
        core_before = self._core_before(job)
        vector = self.table.schema.vector(task.pod.requests)
        if task.pod.gpu_share is not None:
            vector[2] = 0.0
        holding = self.table.hold(task.key, choice.node, kind, vector, choice.shares, choice.create)
        previous = (task.status, task.node, task.gpu_groups, task.accepted)
        task.holdings.append(holding)
        task.status = status
        task.node = self.table.names[choice.node]
        task.gpu_groups = tuple(g for g, _ in choice.shares)
        task.accepted = accepted
        self._touch(job)
        self._book(job, accepted)
        core = self._rebook_core(job, core_before)
        undo_claims = None
        if claims is not None:
            undo_claims = place_claims(self.table.devices, task.key, task.node, choice, claims)
            previous_claims, task.claims = task.claims, grants_of(claims, task.node, choice.devices)

        def undo() -> None:
            self._touch(job)
            if undo_claims is not None:
                undo_claims()
                task.claims = previous_claims
            self._book(job, accepted, sign=-1.0)
            self._unbook_core(job, core)
            _drop(task, holding)
            self.table.release(holding)
            task.status, task.node, task.gpu_groups, task.accepted = previous

        self.undo_log.append(undo)

    def place_pick(self, task: Task, pick: Pick, accepted: tuple[float, float, float]) -> None:
        """Allocate or pipeline ``task`` where the shards' streams put it. The shard already holds
        the capacity; the session records no holding of its own (none is needed until a session
        table is built, which then carries the shard's hold)."""
        assert self.source is not None
        source = self.source
        job = self.jobs_by_task[task.key]
        core_before = self._core_before(job)
        previous = (task.status, task.node, task.gpu_groups, task.accepted)
        task.status = Status.PIPELINED if pick.pipelined else Status.ALLOCATED
        task.node = pick.node
        task.gpu_groups = tuple(g for g, _ in pick.shares)
        task.accepted = accepted
        self.picks[task.key] = pick
        self._touch(job)
        self._book(job, accepted)
        core = self._rebook_core(job, core_before)

        def undo() -> None:
            self._touch(job)
            self._book(job, accepted, sign=-1.0)
            self._unbook_core(job, core)
            del self.picks[task.key]
            source.give_back(pick)
            task.status, task.node, task.gpu_groups, task.accepted = previous

        self.undo_log.append(undo)

    def to_pipelined(self, task: Task) -> None:
        """An allocated pod of a job that must wait: its hold becomes a pipelined one."""
        pick = self.picks.get(task.key)
        if pick is not None and self.source is not None and not task.holdings:
            self._pick_to_pipelined(task, pick, self.source)
            return
        old = next(h for h in task.holdings if h.kind is Kind.ACTIVE)
        new = self._rehold(task, old, Kind.PIPELINED)
        task.status = Status.PIPELINED
        job = self.jobs_by_task[task.key]
        self._touch(job)

        def undo() -> None:
            self._touch(job)
            self._swap(task, new, old)
            task.status = Status.ALLOCATED

        self.undo_log.append(undo)

    def _pick_to_pipelined(self, task: Task, pick: Pick, source: PickSource) -> None:
        source.pipeline(pick)
        task.status = Status.PIPELINED
        job = self.jobs_by_task[task.key]
        self._touch(job)

        def undo() -> None:
            self._touch(job)
            source.pipeline(pick, pipelined=False)
            task.status = Status.ALLOCATED

        self.undo_log.append(undo)

    def evict(self, task: Task, action: str, preemptor: str | None) -> None:
        """The pod is evicted in this session: what it held is now releasing."""
        self._evicted.setdefault(task.key, []).append(self._evict(task, action, preemptor))

        def undo() -> None:
            reversals = self._evicted.get(task.key)
            if reversals:  # none left when the eviction was already taken back (unevict)
                reversals.pop().undo()

        self.undo_log.append(undo)

    def is_back_home(self, task: Task, choice: Choice) -> bool:
        """A victim of this statement placed again on a node that still lists it: where it runs
        (or, for a pod an earlier job moved, where it was pipelined), on the same shared GPUs.
        KAI's Statement.Pipeline then takes back the pod's eviction (``unevict``)."""
        if task.status is not Status.RELEASING or not self._evicted.get(task.key):
            return False
        held_here = [h for h in task.holdings if h.node == choice.node]
        if not held_here or task.pod.gpu_share is None:
            return bool(held_here)
        groups = tuple(g for g, _ in choice.shares)
        return any(tuple(g for g, _ in h.shares) == groups for h in held_here)

    def restores_on(self, task: Task) -> int | None:
        """The node whose hold ``unevict`` gives back: that of this statement's last eviction of
        the pod, which need not be the node the pod was found back on (a pod evicted from A by a
        committed statement, pipelined to B and evicted from B by this one is listed on both)."""
        return self._evicted[task.key][-1].node

    def unevict(self, task: Task) -> None:
        """KAI's Statement.Pipeline of a victim onto the node it was evicted from: no move, the
        eviction is taken back and the pod keeps running where it runs."""
        reversal = self._evicted[task.key].pop()
        record = next(e for e in reversed(self.evictions) if e.task is task)  # the one being taken back
        action, preemptor = record.action, record.preemptor
        reversal.undo()

        def undo() -> None:
            self._evicted.setdefault(task.key, []).append(self._evict(task, action, preemptor))

        self.undo_log.append(undo)

    def _evict(self, task: Task, action: str, preemptor: str | None) -> _Reversal:
        """Evicts ``task``; returns what takes the eviction back."""
        job = self.jobs_by_task[task.key]
        self._touch(job)
        core_before = self._core_before(job)
        previous_status = task.status
        current = next((h for h in task.holdings if h.kind is not Kind.RELEASING), None)
        replacement = None
        if current is not None:
            # A pipelined pod evicted later in the session leaves releasing capacity behind, as in
            # KAI's node books: the node is not idle for it, pods can only be pipelined there.
            replacement = self._rehold(task, current, Kind.RELEASING)
        accepted = task.accepted
        self._book(job, accepted, sign=-1.0)
        task.status = Status.RELEASING
        core = self._rebook_core(job, core_before)
        was_evicted = task.evicted_in_session
        task.evicted_in_session = True
        record = Eviction(task, action, preemptor)
        self.evictions.append(record)
        undo_claims, charges = evict_claims(self.table.devices, task.pod) if task.pod.resource_claims else (None, [])
        undo_charges = [self._charge(payer, gpus) for payer, gpus in charges if gpus]

        def reverse() -> None:
            self._touch(job)
            for undo_charge in reversed(undo_charges):
                undo_charge()
            if undo_claims is not None:
                undo_claims()
            self.evictions.remove(record)
            task.evicted_in_session = was_evicted
            task.status = previous_status
            self._book(job, accepted)
            self._unbook_core(job, core)
            if replacement is not None and current is not None:
                self._swap(task, replacement, current)

        return _Reversal(current.node if current is not None else None, reverse)

    def _charge(self, pod_key: str, gpus: float) -> Undo:
        """A shared claim's GPUs move to the user that pays for them now (same claim, same count)."""
        job = self.jobs_by_task.get(pod_key)
        task = next((t for t in job.tasks if t.key == pod_key), None) if job is not None else None
        if job is None or task is None:
            return lambda: None  # a user that is not this scheduler's pod: its queue is not ours
        amount = (gpus, 0.0, 0.0)
        core_before = self._core_before(job)
        task.accepted = (task.accepted[0] + gpus, task.accepted[1], task.accepted[2])
        self._touch(job)
        self._book(job, amount)
        core = self._rebook_core(job, core_before)

        def undo() -> None:
            task.accepted = (task.accepted[0] - gpus, task.accepted[1], task.accepted[2])
            self._touch(job)
            self._book(job, amount, sign=-1.0)
            self._unbook_core(job, core)

        return undo

    # ---------------------------------------------------------- queue books
    def _book(self, job: Job, amount: Sequence[float], sign: float = 1.0) -> None:
        """A change of the job's allocation, on its queue; all of it non-preemptible when the job
        is (a semi-preemptible job's core is booked apart, by ``_rebook_core``)."""
        self.queues.add_allocation(job.queue, amount, job.preemptible or job.semi_preemptible, sign)

    @staticmethod
    def _core_before(job: Job) -> Quota | None:
        return core_quota(job) if job.semi_preemptible else None

    def _rebook_core(self, job: Job, before: Quota | None) -> Quota | None:
        """Book the change of a semi-preemptible job's core since ``before`` as non-preemptible
        allocation; the change is returned for the undo (None: nothing changed)."""
        if before is None:
            return None
        after = core_quota(job)
        change = (after[0] - before[0], after[1] - before[1], after[2] - before[2])
        if change == (0.0, 0.0, 0.0):
            return None
        self.queues.add_non_preemptible(job.queue, change)
        return change

    def _unbook_core(self, job: Job, change: Quota | None) -> None:
        if change is not None:
            self.queues.add_non_preemptible(job.queue, change, sign=-1.0)

    # ------------------------------------------------------------- helpers
    def _rehold(self, task: Task, old: Holding, kind: Kind) -> Holding:
        new = self.table.rehold(old, kind)
        _drop(task, old)
        task.holdings.append(new)
        return new

    def _swap(self, task: Task, current: Holding, back: Holding) -> None:
        """Turn ``current`` back into ``back``, the hold ``_rehold`` made it from (same pod, node,
        amounts and shared GPUs; only the kind differs)."""
        restored = self.table.rehold(current, back.kind)
        _drop(task, current)
        task.holdings.append(restored)


def _drop(task: Task, holding: Holding) -> None:
    """Remove this very holding: a pod moved in the session holds on two nodes, and holdings
    compare by value (numpy vectors), so list.remove would compare arrays. Failing that, one
    equal to it: an eviction taken back holds again with a new, equal holding (``_swap``), and a
    placement made before that eviction in the same statement is undone after it."""
    for i, held in enumerate(task.holdings):
        if held is holding:
            del task.holdings[i]
            return
    for i, held in enumerate(task.holdings):
        if _same_hold(held, holding):
            del task.holdings[i]
            return
    raise ValueError(f"{task.key} does not hold {holding}")


def _same_hold(a: Holding, b: Holding) -> bool:
    return (a.pod, a.node, a.kind, a.shares, a.created_groups) == (
        b.pod,
        b.node,
        b.kind,
        b.shares,
        b.created_groups,
    ) and np.array_equal(a.vector, b.vector)
