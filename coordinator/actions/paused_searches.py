"""Victim searches stopped at the cycle's time budget and taken up again where they stopped.

KAI's job solver grows a pending job pod by pod, and each step simulates the victims recorded so
far over again, so a gang of N pods costs N steps and work growing with N squared: a 500-pod
gang reclaiming 500 nodes searches for tens of seconds. Between jobs a cycle stops at its time
budget (``sessionTimeBudget``); inside one job's search it did not, and such a cycle held every
other decision back for as long as the search took.

A search past the budget now stops between two steps. What the next step needs is kept here: the
job's pods in the search's order, how many of them the search has made room for, and the victim
chunks recorded so far (by pod, with the node each ran on). Next cycle the same action, reaching
the job, goes on from there if the job's pods are the same and every recorded victim still runs
where it ran; otherwise the search starts over. Each step re-simulates from the session as it is,
so a search taken up again in an unchanged cluster decides exactly what it would have decided
without the stop; in a changed one, the final step's scenario is still checked against the
cluster as it is then, like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordinator.actions.scenario import job_with_tasks
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.tasks import Task


@dataclass(frozen=True, slots=True)
class PausedSearch:
    pods: tuple[str, ...]  # the job's pods to allocate, in the search's order
    steps_done: int  # the first this many pods have room in the recorded victims' place
    recorded: tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...]  # chunks: job, (pod, node)


class SearchPaused(Exception):
    """A victim search stopped at the time budget; it is taken up again next cycle."""

    def __init__(self, steps_done: int, pods: int) -> None:
        super().__init__(f"room made for {steps_done} of {pods} pods")
        self.steps_done = steps_done
        self.pods = pods


class PausedSearches:
    """The paused searches, per action and job, kept by the coordinator across cycles."""

    def __init__(self) -> None:
        self._paused: dict[tuple[str, str], PausedSearch] = {}

    def __len__(self) -> int:
        return len(self._paused)

    def steps_done(self, action: str, job_key: str) -> int:
        """How many steps the job's search has done (0: no search of it is paused)."""
        paused = self._paused.get((action, job_key))
        return 0 if paused is None else paused.steps_done

    def under_way_elsewhere(self, action: str, job_key: str) -> bool:
        """Whether another action's search for the job is paused: the other actions leave the job
        to it (each cycle they would search for it again, and fail, while it goes on)."""
        return any(job == job_key and other != action for other, job in self._paused)

    def jobs(self) -> set[str]:
        """The jobs with a search to go on with."""
        return {job for _, job in self._paused}

    def pause(self, action: str, job: Job, tasks: list[Task], steps_done: int, recorded: list[Job]) -> None:
        chunks = tuple((chunk.key, tuple((t.key, t.node) for t in chunk.tasks)) for chunk in recorded)
        self._paused[(action, job.key)] = PausedSearch(tuple(t.key for t in tasks), steps_done, chunks)

    def resume(self, action: str, job: Job, tasks: list[Task], state: SessionState) -> tuple[int, list[Job]] | None:
        """Where the job's paused search stopped (steps done, recorded victim chunks), if it may
        go on from there; the pause is used up either way."""
        paused = self._paused.pop((action, job.key), None)
        if paused is None or paused.pods != tuple(t.key for t in tasks):
            return None
        recorded: list[Job] = []
        for job_key, pods in paused.recorded:
            victim_job = state.jobs.get(job_key)
            if victim_job is None:
                return None
            victims: list[Task] = []
            for key, node in pods:
                task = state.tasks.get(key)
                if task is None or task.node != node or not task.status.active_allocated:
                    return None
                victims.append(task)
            recorded.append(job_with_tasks(victim_job, victims))
        return paused.steps_done, recorded

    def keep_only(self, jobs: dict[str, Job]) -> None:
        """Forget the searches of jobs that are gone or have no pod waiting any more (placed
        meanwhile: a later search of theirs starts afresh)."""
        for key in [key for key in self._paused if key[1] not in jobs or not jobs[key[1]].has_pending()]:
            del self._paused[key]


@dataclass(frozen=True, slots=True)
class PauseRule:
    """When a running search stops (``due``: the action is past its time budget), and where it is
    kept until it is taken up again."""

    searches: PausedSearches
    due: Callable[[], bool]
