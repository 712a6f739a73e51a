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

A stretch is one continuous period of being short; the report names each queue's longest, and
lists every stretch longer than ``LONG_STRETCH`` (10 simulated minutes) on its own: the KAI rule
its waiting jobs' reasons named over it (``holding_rules``), the share of it during which no
reason named one, and the reason at its largest gap with the figures of every queue the reason
names (held, fair share, deserved quota), so that "dept-3 would go above its deserved quota"
reads with the numbers that made it so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kai_ray.app.sim.holding_rules import ACTION_PART, holding_rule, named_queues, reason_kind, with_figures

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult
    from kai_ray.app.sim.workload import JobSpec
    from kai_ray.model import Queue

TOLERANCE = 1e-6
LONG_STRETCH = 600.0  # seconds: stretches longer than this are listed one by one, with what held them


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

    @property
    def rule(self) -> str | None:
        """The rule named by the reason of its smallest waiting job that names one."""
        for job in sorted(self.waiting, key=lambda j: (j.gpus, j.name)):
            rule = holding_rule(job.reason)
            if rule is not None:
                return rule
        return None

    def telling_reason(self) -> str:
        """The reason that says most about the gap: that of the smallest waiting job whose
        reason names a rule, else that of the smallest waiting job."""
        ordered = sorted(self.waiting, key=lambda j: (j.gpus, j.name))
        return next((j.reason for j in ordered if holding_rule(j.reason) is not None), ordered[0].reason)


Figures = dict[str, tuple[float, float, float | None]]  # queue -> (held, fair share, deserved), GPUs


@dataclass(slots=True)
class Stretch:
    """One continuous period of a queue being short."""

    start: float
    end: float | None = None
    seconds: float = 0.0
    largest_gap: float = 0.0
    paused_seconds: float = 0.0
    idle_gpu_seconds: float = 0.0
    idle_usable_seconds: float = 0.0
    rules: dict[str, float] = field(default_factory=dict)  # rule -> seconds some waiting job's reason named it
    unnamed_seconds: float = 0.0  # no waiting job's reason named a rule
    peak_at: float = 0.0  # when the gap first reached its largest
    peak_reason: str = ""  # ``QueueMoment.telling_reason`` then
    peak_figures: Figures = field(default_factory=dict)

    @property
    def length(self) -> float:
        return (self.end if self.end is not None else self.start) - self.start

    def held_by(self) -> list[tuple[str, float]]:
        """Each rule named over the stretch with the share of its time, the largest first."""
        seconds = self.seconds or 1.0
        return sorted(((rule, t / seconds) for rule, t in self.rules.items()), key=lambda item: (-item[1], item[0]))

    def peak_reason_part(self) -> str:
        """The actions' part of the reason at the largest gap (all of it if no action spoke)."""
        parts = ACTION_PART.split(self.peak_reason)
        return "; ".join(parts[1:]) if len(parts) > 1 else parts[0]

    def peak_text(self) -> str:
        """``peak_reason_part`` and, after it, the figures of the queues it names."""
        reason = self.peak_reason_part()
        figures = with_figures(reason, self.peak_figures)
        return f"{reason} [GPUs: {figures}]" if figures else reason

    def to_json(self) -> dict[str, Any]:
        seconds = self.seconds or 1.0
        return {
            "from": self.start,
            "to": self.end,
            "seconds": self.length,
            "largestGapGpus": self.largest_gap,
            "heldBy": [{"rule": rule, "share": share} for rule, share in self.held_by()],
            "noRuleNamedShare": self.unnamed_seconds / seconds if self.seconds else 0.0,
            "searchPausedShare": self.paused_seconds / seconds if self.seconds else 0.0,
            "idleGpus": self.idle_gpu_seconds / seconds if self.seconds else 0.0,
            "idleGpusItsPodsFit": self.idle_usable_seconds / seconds if self.seconds else 0.0,
            "atLargestGap": {
                "at": self.peak_at,
                "reason": self.peak_reason_part(),
                "queues": {
                    name: dict(zip(("held", "fairShare", "deserved"), self.peak_figures[name], strict=True))
                    for name in named_queues(self.peak_reason_part(), self.peak_figures)
                },
            },
        }


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
    stretches: list[Stretch] = field(default_factory=list)  # closed, and the open one last

    @property
    def longest_seconds(self) -> float:
        return self.longest[1] - self.longest[0]

    def long_stretches(self, bound: float = LONG_STRETCH) -> list[Stretch]:
        """The closed stretches longer than ``bound``."""
        return [s for s in self.stretches if s.end is not None and s.length > bound]

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
            "stretches": len([s for s in self.stretches if s.end is not None]),
            "longStretches": [s.to_json() for s in self.long_stretches()],
        }


FreeGpus = Callable[[], list[float]]  # idle GPUs of every node


class ShortfallTracker:
    """Per leaf queue, the time spent short and why; fed every cycle and every time sample."""

    def __init__(self, leaves: tuple[str, ...], specs: Mapping[str, JobSpec], tree: Iterable[Queue] = ()) -> None:
        self.leaves = leaves
        self.specs = specs  # by job name
        # Every queue's deserved GPUs (None: it deserves what it requests), for the figures.
        self.deserved: dict[str, float | None] = {q.name: (q.gpu.quota if q.gpu.quota >= 0 else None) for q in tree}
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
        self._settle(now, moments, figures)

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
            paused = any(job.paused for job in moment.waiting)
            if paused:
                queue.paused_seconds += span
            stretch = queue.stretches[-1]
            stretch.seconds += span
            stretch.idle_gpu_seconds += moment.idle_gpus * span
            stretch.idle_usable_seconds += moment.idle_usable * span
            if paused:
                stretch.paused_seconds += span
            rules = {rule for job in moment.waiting if (rule := holding_rule(job.reason)) is not None}
            for rule in rules:
                stretch.rules[rule] = stretch.rules.get(rule, 0.0) + span
            if not rules:
                stretch.unnamed_seconds += span
            for kind, example, jobs in _reasons(moment.waiting):
                entry = queue.reasons.setdefault(kind, ReasonTime())
                entry.seconds += span
                entry.example = example
                entry.jobs.update(jobs)

    def finish(self, now: float) -> None:
        self.sample(now)
        self._settle(now, {}, {})

    def _settle(self, now: float, moments: dict[str, QueueMoment], figures: Mapping[str, Mapping[str, Any]]) -> None:
        """Open and close stretches where a queue became short or stopped being short."""
        for name in set(self._now) | set(moments):
            queue = self.queues[name]
            if name in moments:
                moment = moments[name]
                queue.largest_gap = max(queue.largest_gap, moment.gap)
                for job in moment.waiting:
                    queue.job_shapes.setdefault(job.name, self._shape(job))
                if queue.stretch_start is None:
                    queue.stretch_start = now
                    queue.stretches.append(Stretch(now))
                stretch = queue.stretches[-1]
                if moment.gap > stretch.largest_gap + TOLERANCE:
                    stretch.largest_gap = moment.gap
                    stretch.peak_at = now
                    stretch.peak_reason = moment.telling_reason()
                    stretch.peak_figures = self._figures(figures)
            elif queue.stretch_start is not None:
                if now - queue.stretch_start > queue.longest_seconds:
                    queue.longest = (queue.stretch_start, now)
                queue.stretch_start = None
                queue.stretches[-1].end = now
        self._now = moments

    def _figures(self, figures: Mapping[str, Mapping[str, Any]]) -> Figures:
        return {
            name: (float(q["allocated"]["gpu"]), float(q["fairShare"]["gpu"]), self.deserved.get(name))
            for name, q in figures.items()
        }

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
