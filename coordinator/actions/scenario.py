"""A victim scenario: the pods a pending job still needs and the pods that may make room.

Victims accumulate: a scenario keeps the victims *recorded* by earlier steps of the
same job (they are evicted in every simulation) and the *potential* victims added one
job-chunk at a time from the victims queue. Cheap filters reject scenarios that cannot
work before anything is simulated.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from coordinator.jobs import Job, PodSet
from coordinator.session import SessionState
from coordinator.subgroups import clone_tree
from coordinator.tasks import Task
from shards.constraints import tolerates_all
from shards.node_table import NodeTable
from shards.shapes import GPU


def job_with_tasks(job: Job, tasks: list[Task], min_from_tasks: bool = False) -> Job:
    """A stand-in for ``job`` holding only ``tasks`` (KAI's CloneWithTasks). With
    ``min_from_tasks`` each pod set's minimum becomes the number of its tasks given."""
    wanted = {id(t) for t in tasks}
    pod_sets = {}
    for name, ps in job.pod_sets.items():
        kept = [t for t in ps.tasks if id(t) in wanted]
        minimum = len(kept) if min_from_tasks else ps.min_available
        if min_from_tasks and not kept:
            continue
        pod_sets[name] = PodSet(name, minimum, kept)
    stand_in = Job(job.group, job.queue, pod_sets, job.preemptible, job.priority, cacheable=False)
    stand_in.boost, stand_in.overrun = job.boost, job.overrun  # its place in the job order
    if job.tree is not None:
        stand_in.tree = clone_tree(job.tree, pod_sets, min_from_tasks)
    return stand_in


@dataclass(slots=True)
class Scenario:
    preemptor: Job  # the partial job: only the pods this step must place
    pending: list[Task]
    recorded_jobs: list[Job]  # victim chunks fixed by earlier steps
    potential: list[Task] = field(default_factory=list)
    potential_jobs_by_node: dict[str, list[str]] = field(default_factory=dict)
    chunks_by_job: dict[str, list[Job]] = field(default_factory=dict)
    victims: dict[str, list[Task]] = field(default_factory=dict)  # job key -> tasks, in order added
    latest_job: Job | None = None

    def __post_init__(self) -> None:
        for chunk in self.recorded_jobs:
            self._add_chunk(chunk)

    @property
    def recorded_tasks(self) -> list[Task]:
        return [t for chunk in self.recorded_jobs for t in chunk.tasks]

    def add_potential(self, chunk: Job, original: Job) -> None:
        tasks = chunk.tasks
        self.potential.extend(tasks)
        self._add_chunk(chunk)
        for task in tasks:
            node = task.node or ""
            jobs = self.potential_jobs_by_node.setdefault(node, [])
            if chunk.key not in jobs:
                jobs.append(chunk.key)
        self.latest_job = original

    def _add_chunk(self, chunk: Job) -> None:
        self.chunks_by_job.setdefault(chunk.key, []).append(chunk)
        self.victims.setdefault(chunk.key, []).extend(chunk.tasks)

    def victim_tasks_on_node(self, node: str) -> list[Task]:
        """Every task of the potential-victim jobs that have a pod on ``node``."""
        out: list[Task] = []
        for job_key in self.potential_jobs_by_node.get(node, []):
            for chunk in self.chunks_by_job[job_key]:
                out.extend(chunk.tasks)
        return out


class IdleGpuFilter:
    """KAI's accumulated idle-GPU filter: could the pending pods' whole GPUs fit on the
    nodes with the most free-or-freeing GPUs, counting what the victims give back?

    Only the ``k`` best nodes matter (k = pods pending), so they are kept in a small sorted
    list that each new victim can only improve, as KAI does.
    """

    def __init__(self, state: SessionState, scenario: Scenario) -> None:
        table = state.table
        headroom = gpu_headroom_all(state)
        self.capacity: dict[str, float] = {}
        self.required = sorted((required_gpus(t) for t in scenario.pending), reverse=True)
        k = max(len(self.required), 1)
        present = np.flatnonzero(table.present)
        best = present[np.argsort(-headroom[present], kind="stable")[:k]]
        self.top: list[tuple[float, str]] = [(float(headroom[r]), table.names[r]) for r in best]
        self.headroom = headroom
        self.table = table
        self.seen: set[str] = set()

    def _credit(self, node: str, gpus: float) -> None:
        row = self.table.index.get(node)
        if row is None:
            return
        value = self.capacity.get(node, float(self.headroom[row])) + gpus
        self.capacity[node] = value
        names = [name for _, name in self.top]
        if node in names:
            self.top[names.index(node)] = (value, node)
        elif len(self.top) < len(self.required) or not self.top or value > self.top[-1][0]:
            self.top.append((value, node))
        else:
            return
        self.top.sort(key=lambda item: -item[0])
        del self.top[max(len(self.required), 1) :]

    def could_ever_pass(self, ceiling: np.ndarray) -> bool:
        """False when no scenario can pass, whatever its victims: ``ceiling`` bounds what each
        node could offer (``gpu_ceiling``), and two conditions every passing scenario meets fail
        even there (the largest pod fits on one node; the pods fit in the best nodes together).
        Both only grow with capacity, so failing at the ceiling is failing everywhere; the
        search is then skipped rather than run through every running job of the cluster."""
        needs = [need for need in self.required if need > 0]
        if not needs:
            return True
        best = np.sort(ceiling)[::-1][: len(needs)]
        return bool(needs[0] <= best[0] and sum(needs) <= float(best.sum()))

    def passes(self, scenario: Scenario) -> bool:
        for task in (*scenario.recorded_tasks, *scenario.potential):
            if task.key in self.seen or not task.node:
                continue
            self.seen.add(task.key)
            if task.accepted[0]:
                self._credit(task.node, task.accepted[0])
        if not self.required or self.required[0] == 0:
            return True
        used = {name: 0.0 for _, name in self.top}
        for need in self.required:
            if need == 0:
                return True
            for capacity, name in self.top:
                if capacity < need:
                    return False  # sorted: no node has room for this pod
                if capacity - used[name] >= need:
                    used[name] += need
                    break
            else:
                return False
        return True


class NodeAffinityFilter:
    """Pending pods with a node selector or affinity need a matching node among the
    feasible nodes and the victims' nodes."""

    def __init__(self, state: SessionState, scenario: Scenario, feasible: set[str]) -> None:
        self.state = state
        self.nodes = set(feasible)
        self.constrained = [
            t for t in scenario.pending if t.shape.constraints.node_selector or t.shape.constraints.affinity
        ]

    def active(self) -> bool:
        return bool(self.constrained)

    def passes(self, scenario: Scenario) -> bool:
        for task in scenario.recorded_tasks + scenario.potential:
            if task.node:
                self.nodes.add(task.node)
        table = self.state.table
        for task in self.constrained:
            constraints = task.shape.constraints
            if not any(
                table.present[row]
                and constraints.matches_labels(table.labels[row], name)
                and tolerates_all((), constraints.tolerations)
                for name in self.nodes
                if (row := table.index.get(name)) is not None
            ):
                return False
        return True


def required_gpus(task: Task) -> float:
    """The GPUs KAI's idle-GPU filter asks room for: whole devices, or a fraction times its
    devices (KAI's ResReq.GPUs(), in hundredths); a GPU-memory request asks none, its portion
    being known only on a node."""
    share = task.pod.gpu_share
    if share is None or share.fraction is None:
        return task.pod.requests.gpu
    return task.pod.requests.gpu + round(share.fraction * 100) * share.devices / 100


def gpu_ceiling(state: SessionState) -> np.ndarray:
    """Per table row, at least as many GPUs as any victim scenario could make available there:
    the idle and releasing GPUs the idle-GPU filter starts from, plus the GPUs every placed pod
    holds (any victim is one of them). Valid while the session is as it was when computed."""
    table = state.table
    ceiling = np.where(table.present, gpu_headroom_all(state), 0.0)
    for task in state.tasks.values():
        if task.node and task.accepted[0] > 0:
            row = table.index.get(task.node)
            if row is not None:
                ceiling[row] += task.accepted[0]
    return ceiling


# The last ``gpu_headroom_all`` of each table and the table's clock then: a victim search asks
# for it more than once per job (the feasible nodes, then the idle-GPU filter) while the table
# has not changed, and at thousands of nodes each answer is a pass over every row.
_HEADROOM: weakref.WeakKeyDictionary[NodeTable, tuple[int, np.ndarray]] = weakref.WeakKeyDictionary()


def gpu_headroom_all(state: SessionState) -> np.ndarray:
    """``gpu_headroom`` for every row: whole devices vectorized, shared GPUs row by row. The
    array is shared by callers until the table changes: read it, do not write it."""
    table = state.table
    known = _HEADROOM.get(table)
    if known is not None and known[0] == table.clock:
        return known[1]
    out = table.future[:, GPU].astype(np.float64)
    for row, groups in enumerate(table.groups):
        if groups:
            out[row] = gpu_headroom(state, row)
    out.flags.writeable = False
    _HEADROOM[table] = (table.clock, out)
    return out


def gpu_headroom(state: SessionState, row: int) -> float:
    """Idle plus releasing GPUs of a node, partly free shared GPUs included (KAI's sums)."""
    table = state.table
    whole = float(table.future[row, GPU])
    device = int(table.gpu_mem[row]) or 1
    shared = 0.0
    for usage in table.groups[row].values():
        allocated = usage.active + usage.releasing
        if allocated > 0:
            shared += 1 - np.ceil(allocated / device * 100) / 100
        releasing_net = usage.releasing - usage.pipelined
        if releasing_net > 0 and not usage.frees_whole_device:
            shared += np.ceil(releasing_net / device * 100) / 100
    return whole + shared
