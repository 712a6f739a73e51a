"""Queues held below their fair share: for how long, by how much, and what held them there.

A leaf queue is *short* while its fair share exceeds what it holds by at least one job's worth
of GPUs: the GPUs of the smallest job waiting in it (its pending pods). That job would then fit
within the queue's share, which is what KAI's reclaim asks before it looks for victims; a
smaller gap is one no waiting job could close without taking the queue above its share.
Jobs that wait for no GPU (CPU-only) are left out: they do not explain a GPU gap.

While a queue is short, the tracker charges the time to the pending reasons of its waiting
jobs, as the coordinator gave them: a reason counts for as long as at least one waiting job
of the queue had it, so the shares of one queue may add up to more than 100%. Reasons that
differ only in figures (node counts, pods found) are one reason. It also notes how much of
that time the waiting jobs' victim searches were paused after failing (the backoff), and the
idle GPUs meanwhile: all of them, and those on nodes with as many free GPUs as one pod of the
queue's waiting jobs asks (a fair share counts every GPU of the cluster; an 8-GPU pod cannot
use one idle on a 4-GPU node).

A stretch is one continuous period of being short; the report names each queue's longest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult
    from kai_ray.sim.workload import JobSpec

TOLERANCE = 1e-6
# A figure on its own (not part of a name such as dept-2 or job-00481): "0 pods", "335 node(s)".
_FIGURE = re.compile(r"(?<![\w./-])\d+(?:\.\d+)?(?![\w/-])")
# The pod allocate's message happens to name ("for pod sim/job-00398-4 due to").
_POD = re.compile(r"\bpod [\w.-]+/[\w.-]+")


def reason_kind(reason: str) -> str:
    """The reason without its figures and the pod it names, so that "335 node(s)" and "340
    node(s)", or two pods of one gang, are one reason."""
    return _FIGURE.sub("#", _POD.sub("pod #", reason))


@dataclass(frozen=True, slots=True)
class WaitingJob:
    name: str  # the job's key, namespace/name
    pending_pods: int
    gpus: float  # what its pending pods ask, in GPUs
    gpu_per_pod: float
    reason: str
    paused: bool  # its victim search is paused after failing in recent cycles


@dataclass(frozen=True, slots=True)
class QueueMoment:
    """A short queue as one cycle left it (held until the next cycle)."""

    gap: float  # fair share - allocated, GPUs
    waiting: tuple[WaitingJob, ...]
    idle_gpus: float
    idle_usable: float  # idle GPUs on nodes with room (in GPUs) for one of its waiting pods


@dataclass(slots=True)
class ReasonTime:
    seconds: float = 0.0
    example: str = ""  # the latest full text
    jobs: set[str] = field(default_factory=set)


@dataclass(slots=True)
class QueueShortfall:
    seconds: float = 0.0
    largest_gap: float = 0.0
    longest: tuple[float, float] = (0.0, 0.0)  # (from, to) of the longest stretch
    stretch_start: float | None = None
    paused_seconds: float = 0.0
    idle_gpu_seconds: float = 0.0
    idle_usable_seconds: float = 0.0
    reasons: dict[str, ReasonTime] = field(default_factory=dict)
    job_shapes: dict[str, str] = field(default_factory=dict)  # job -> what it asks, for the report

    @property
    def longest_seconds(self) -> float:
        return self.longest[1] - self.longest[0]

    def dominant(self, count: int = 3) -> list[tuple[str, ReasonTime]]:
        return sorted(self.reasons.items(), key=lambda item: (-item[1].seconds, item[0]))[:count]

    def to_json(self) -> dict[str, Any]:
        seconds = self.seconds or 1.0
        return {
            "seconds": self.seconds,
            "longestSeconds": self.longest_seconds,
            "longestFrom": self.longest[0] if self.longest_seconds else None,
            "longestTo": self.longest[1] if self.longest_seconds else None,
            "largestGapGpus": self.largest_gap,
            "searchPausedShare": self.paused_seconds / seconds if self.seconds else 0.0,
            "idleGpus": self.idle_gpu_seconds / seconds if self.seconds else 0.0,
            "idleGpusItsPodsFit": self.idle_usable_seconds / seconds if self.seconds else 0.0,
            "reasons": [
                {
                    "reason": time.example,
                    "seconds": time.seconds,
                    "share": time.seconds / seconds,
                    "jobs": [f"{job} ({self.job_shapes.get(job, '?')})" for job in sorted(time.jobs)],
                }
                for _, time in self.dominant(5)
            ],
        }


FreeGpus = Callable[[], list[float]]  # idle GPUs of every node


class ShortfallTracker:
    """Per leaf queue, the time spent short and why; fed every cycle and every time sample."""

    def __init__(self, leaves: tuple[str, ...], specs: Mapping[str, JobSpec]) -> None:
        self.leaves = leaves
        self.specs = specs  # by job name
        self.queues: dict[str, QueueShortfall] = {name: QueueShortfall() for name in leaves}
        self._now: dict[str, QueueMoment] = {}
        self._last = 0.0

    def cycle(self, now: float, result: CycleResult, free_gpus: FreeGpus) -> None:
        """Take the queues as this cycle left them (the state holds until the next cycle); the
        time up to now is charged first, to the state that held over it."""
        self.sample(now)
        figures = result.decisions.queues
        gaps = {}
        for name in self.leaves:
            queue = figures.get(name)
            if queue is not None:
                gap = float(queue["fairShare"]["gpu"]) - float(queue["allocated"]["gpu"])
                if gap > TOLERANCE:
                    gaps[name] = gap
        moments: dict[str, QueueMoment] = {}
        if gaps:
            waiting = self._waiting(result, set(gaps))
            free: list[float] | None = None
            for name, gap in gaps.items():
                jobs = waiting.get(name, ())
                if not jobs or gap + TOLERANCE < min(job.gpus for job in jobs):
                    continue
                if free is None:
                    free = free_gpus()
                smallest_pod = min(job.gpu_per_pod for job in jobs)
                usable = sum(f for f in free if f + TOLERANCE >= smallest_pod)
                moments[name] = QueueMoment(gap, tuple(jobs), sum(free), usable)
        self._settle(now, moments)

    def sample(self, now: float) -> None:
        """Charge the time since the last sample to the queues short over it."""
        span = now - self._last
        self._last = now
        if span <= 0:
            return
        for name, moment in self._now.items():
            queue = self.queues[name]
            queue.seconds += span
            queue.idle_gpu_seconds += moment.idle_gpus * span
            queue.idle_usable_seconds += moment.idle_usable * span
            if any(job.paused for job in moment.waiting):
                queue.paused_seconds += span
            for kind, example, jobs in _reasons(moment.waiting):
                entry = queue.reasons.setdefault(kind, ReasonTime())
                entry.seconds += span
                entry.example = example
                entry.jobs.update(jobs)

    def finish(self, now: float) -> None:
        self.sample(now)
        self._settle(now, {})

    def _settle(self, now: float, moments: dict[str, QueueMoment]) -> None:
        """Open and close stretches where a queue became short or stopped being short."""
        for name in set(self._now) | set(moments):
            queue = self.queues[name]
            if name in moments:
                queue.largest_gap = max(queue.largest_gap, moments[name].gap)
                for job in moments[name].waiting:
                    queue.job_shapes.setdefault(job.name, self._shape(job))
                if queue.stretch_start is None:
                    queue.stretch_start = now
            elif queue.stretch_start is not None:
                if now - queue.stretch_start > queue.longest_seconds:
                    queue.longest = (queue.stretch_start, now)
                queue.stretch_start = None
        self._now = moments

    def _waiting(self, result: CycleResult, queues: set[str]) -> dict[str, list[WaitingJob]]:
        """The jobs with pending pods that ask for GPUs, per queue of ``queues``."""
        pods: dict[str, list[str]] = {}  # job -> the reason of each pending pod
        for key, decision in result.decisions.pods.items():
            if decision.status != "Pending" or result.pod_queues.get(key) not in queues:
                continue
            pods.setdefault(result.pod_jobs.get(key, key), []).append(decision.reason)
        waiting: dict[str, list[WaitingJob]] = {}
        for job, reasons in pods.items():
            spec = self.specs.get(job.rsplit("/", 1)[-1])
            if spec is None or spec.gpu_per_pod <= 0:
                continue
            waiting.setdefault(spec.queue, []).append(
                WaitingJob(
                    job,
                    len(reasons),
                    len(reasons) * spec.gpu_per_pod,
                    spec.gpu_per_pod,
                    Counter(reasons).most_common(1)[0][0],
                    job in result.paused_jobs,
                )
            )
        return waiting

    def _shape(self, job: WaitingJob) -> str:
        spec = self.specs.get(job.name.rsplit("/", 1)[-1])
        if spec is None:
            return f"{job.pending_pods} pods"
        per_pod = f"{spec.gpu_per_pod:g} GPU{'s' if spec.gpu_per_pod != 1 else ''}"
        if spec.pods == 1:
            return f"1 pod of {per_pod}"
        together = "all together" if spec.min_member == spec.pods else f"at least {spec.min_member} together"
        return f"{spec.pods} pods of {per_pod}, {together}"


def _reasons(waiting: tuple[WaitingJob, ...]) -> list[tuple[str, str, set[str]]]:
    """Each distinct reason among the waiting jobs once: (kind, latest text, the jobs)."""
    by_kind: dict[str, tuple[str, set[str]]] = {}
    for job in waiting:
        kind = reason_kind(job.reason)
        _, jobs = by_kind.setdefault(kind, (job.reason, set()))
        jobs.add(job.name)
        by_kind[kind] = (job.reason, jobs)
    return [(kind, example, jobs) for kind, (example, jobs) in by_kind.items()]
