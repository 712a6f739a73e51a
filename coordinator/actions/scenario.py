"""A victim scenario: the pods a pending job still needs and the pods that may make room.

Victims accumulate: a scenario keeps the victims *recorded* by earlier steps of the
same job (they are evicted in every simulation) and the *potential* victims added one
job-chunk at a time from the victims queue. The solver's scenario filters
(``scenario_filters``) reject scenarios that cannot work before anything is simulated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.jobs import Job, PodSet
from coordinator.subgroups import clone_tree
from coordinator.tasks import Task


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
class VictimCursor:
    """How far a filter has read a scenario's victims. A step's filters are asked about every
    scenario the step grows, and a search may add thousands of victims before one node holds
    enough (a whole-node preemptor among one-GPU jobs spread over the nodes): reading them all
    again for each scenario made the step quadratic in its victims."""

    started: bool = False  # the recorded victims were given
    seen: int = 0  # how many potential victims were given


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

    def victims_after(self, cursor: VictimCursor) -> list[Task]:
        """The victims ``cursor`` has not been given yet (recorded first, then the potential ones
        in the order they were added), and moves it past them."""
        fresh = [] if cursor.started else self.recorded_tasks
        cursor.started = True
        if cursor.seen < len(self.potential):
            fresh = fresh + self.potential[cursor.seen :]
            cursor.seen = len(self.potential)
        return fresh

    def victim_tasks_on_node(self, node: str) -> list[Task]:
        """Every task of the potential-victim jobs that have a pod on ``node``."""
        out: list[Task] = []
        for job_key in self.potential_jobs_by_node.get(node, []):
            for chunk in self.chunks_by_job[job_key]:
                out.extend(chunk.tasks)
        return out
