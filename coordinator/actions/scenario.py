"""A victim scenario: the pods a pending job still needs and the pods that may make room.

Victims accumulate: a scenario keeps the victims *recorded* by earlier steps of the
same job (they are evicted in every simulation) and the *potential* victims added one
job-chunk at a time from the victims queue. Cheap filters reject scenarios that cannot
work before anything is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coordinator.jobs import Job, PodSet, Task
from coordinator.session_state import SessionState
from shards.constraints import tolerates_all
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
    clone = Job(job.group, job.queue, pod_sets, job.preemptible, job.priority)
    return clone


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
    nodes with the most free-or-freeing GPUs, counting what the victims give back?"""

    def __init__(self, state: SessionState, scenario: Scenario) -> None:
        table = state.table
        self.capacity = {table.names[r]: gpu_headroom(state, r) for r in range(len(table)) if table.present[r]}
        self.required = sorted((t.pod.requests.gpu for t in scenario.pending), reverse=True)
        self.seen: set[str] = set()

    def passes(self, scenario: Scenario) -> bool:
        for task in scenario.recorded_tasks + scenario.potential:
            if task.key in self.seen or not task.node:
                continue
            self.seen.add(task.key)
            if task.node in self.capacity:
                self.capacity[task.node] += task.accepted[0] if task.pod.gpu_share is None else 0.0
        if not self.required or self.required[0] == 0:
            return True
        top = sorted(self.capacity.items(), key=lambda kv: (-kv[1], kv[0]))[: len(self.required)]
        used = dict.fromkeys((n for n, _ in top), 0.0)
        for need in self.required:
            if need == 0:
                return True
            for name, capacity in top:
                if capacity < need:
                    break
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
        self.constrained = [t for t in scenario.pending if t.shape.constraints.node_selector
                            or t.shape.constraints.affinity]

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
                table.present[row] and constraints.matches_labels(table.labels[row], name)
                and tolerates_all((), constraints.tolerations)
                for name in self.nodes if (row := table.index.get(name)) is not None
            ):
                return False
        return True


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
