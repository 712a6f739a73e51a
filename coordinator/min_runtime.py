"""Minimum runtimes: how long a job runs before preempt or reclaim may take it (KAI's minruntime).

Which minimum applies is resolved on the queue tree, as KAI's resolver does:

- *preempt* (victim and preemptor share a leaf queue): the victim's queue's
  ``preemptMinRuntime``, else its nearest ancestor's, else the config default;
- *reclaim*, method ``lca`` (the default): below the lowest common ancestor of the two queues,
  the child on the victim's side; its ``reclaimMinRuntime``, else the nearest ancestor's above
  it, else the default. Top-level queues of different trees count as siblings. So a value set
  on a queue protects its jobs from its siblings' subtrees and leaves cousins to their own
  parents' rule. Method ``queue`` walks up from the victim's leaf like preempt.

A job is protected while ``now - last start < minimum``; a job that never started (no
last-start time) is not. Elastic jobs (a pod set with more pods than its minimum) pass the
victim filter; the scenario validator then refuses any scenario that takes a protected elastic
job below the minimum of one of its pod sets, so it may lose only its surplus pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from coordinator.jobs import Job
from coordinator.tasks import Task
from kai_ray.model import Queue

Validator = Callable[[dict[str, list[Task]]], bool]


@dataclass(slots=True)
class MinRuntimes:
    """The queues' own settings and the defaults, with per-session caches of resolved values."""

    parents: dict[str, str | None]
    preempt_own: dict[str, float | None]
    reclaim_own: dict[str, float | None]
    default_preempt: float = 0.0
    default_reclaim: float = 0.0
    method: str = "lca"
    _preempt: dict[str, float] = field(default_factory=dict)
    _reclaim: dict[tuple[str, str], float] = field(default_factory=dict)

    @staticmethod
    def of(queues: Iterable[Queue], default_preempt: float, default_reclaim: float, method: str) -> MinRuntimes:
        listed = list(queues)
        names = {q.name for q in listed}
        return MinRuntimes(
            parents={q.name: q.parent if q.parent in names else None for q in listed},
            preempt_own={q.name: q.preempt_min_runtime for q in listed},
            reclaim_own={q.name: q.reclaim_min_runtime for q in listed},
            default_preempt=default_preempt,
            default_reclaim=default_reclaim,
            method=method,
        )

    def path(self, queue: str) -> list[str]:
        """``queue`` and its ancestors, top-level first (only queues that exist)."""
        path: list[str] = []
        current: str | None = queue
        while current is not None and current in self.parents and current not in path:
            path.append(current)
            current = self.parents[current]
        path.reverse()
        return path

    def preempt(self, victim_queue: str) -> float:
        cached = self._preempt.get(victim_queue)
        if cached is None:
            cached = self._preempt[victim_queue] = _nearest(
                reversed(self.path(victim_queue)), self.preempt_own, self.default_preempt
            )
        return cached

    def reclaim(self, reclaimer_queue: str, victim_queue: str) -> float:
        key = (reclaimer_queue, victim_queue)
        cached = self._reclaim.get(key)
        if cached is None:
            cached = self._reclaim[key] = self._resolve_reclaim(reclaimer_queue, victim_queue)
        return cached

    def _resolve_reclaim(self, reclaimer_queue: str, victim_queue: str) -> float:
        theirs = self.path(victim_queue)
        if not theirs:
            return self.default_reclaim
        if self.method == "queue":
            return _nearest(reversed(theirs), self.reclaim_own, self.default_reclaim)
        mine = self.path(reclaimer_queue)
        if not mine or mine[0] != theirs[0]:
            start = 0  # different trees: the victim's top-level queue is the one below the shadow root
        else:
            common = 0
            for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
                if a != b:
                    break
                common = i
            start = min(common + 1, len(theirs) - 1)  # one step below the common ancestor
        return _nearest(reversed(theirs[: start + 1]), self.reclaim_own, self.default_reclaim)


def _nearest(walk: Iterable[str], own: Mapping[str, float | None], default: float) -> float:
    for name in walk:
        value = own.get(name)
        if value is not None:
            return value
    return default


def is_elastic(job: Job) -> bool:
    return any(ps.min_available < len(ps.tasks) for ps in job.pod_sets.values())


def protected(now: float, started: float | None, minimum: float) -> bool:
    return minimum > 0 and started is not None and now - started < minimum


def victim_filter(
    now: float, last_start: Mapping[str, float], minimum_for: Callable[[Job], float]
) -> Callable[[Job], bool]:
    """KAI's victim filter: protected jobs are no victims, elastic ones are judged per scenario."""

    def accept(victim: Job) -> bool:
        return is_elastic(victim) or not protected(now, last_start.get(victim.key), minimum_for(victim))

    return accept


def scenario_validator(
    now: float, last_start: Mapping[str, float], jobs: Mapping[str, Job], minimum_for: Callable[[Job], float]
) -> Validator:
    """Refuses scenarios that take a protected elastic job below the minimum of a pod set."""

    def valid(victims: dict[str, list[Task]]) -> bool:
        for job_key, tasks in victims.items():
            job = jobs[job_key]
            if not is_elastic(job) or not protected(now, last_start.get(job_key), minimum_for(job)):
                continue
            taken: dict[str, int] = {}
            for task in tasks:
                name = task.subgroup if task.subgroup in job.pod_sets else next(iter(job.pod_sets))
                taken[name] = taken.get(name, 0) + 1
            for name, count in taken.items():
                pod_set = job.pod_sets[name]
                running = sum(1 for t in pod_set.tasks if t.original_status.active_used)
                if running - count < pod_set.min_available:
                    return False
        return True

    return valid
