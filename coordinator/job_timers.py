"""Rules that depend on how long a job has waited or run, besides minimum runtimes.

- **Preemption delay** (KAI v0.17): a pod group with ``spec.preemptionDelay`` may not make
  reclaim, preempt or consolidation evict anyone until ``max(created, last eviction) + delay``;
  plain allocation is not delayed, and the job itself stays evictable.
- **Job aging** (beyond KAI, its issue #1970; off unless ``jobAging`` is set): a job with no pod
  placed gains one priority step per ``interval`` it has waited since ``max(created, last
  eviction)``, at most ``maxBoost``. It orders the job in its queue, and lets preempt take
  preemptible jobs of the same queue that are *newer* than the waiting job and below its aged
  priority. Only newer ones: two long-running jobs of one priority never take turns evicting
  each other, and the oldest waiting job gets in first.
- **Expected runtime** (beyond KAI, its issues #904 / #1144; off unless
  ``expectedRuntimeExceeded`` says otherwise): a job whose pod group carries
  ``kai.scheduler/expected-runtime`` and has run longer than that since its last start is
  *overrun*. With ``preemptFirst`` it is offered as a victim before every other job of its
  queue and pending jobs of its queue with at least its priority may preempt it (it stays
  non-preemptible if it is); with ``stop`` it is evicted (``runtime_limit`` action).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass

from coordinator.jobs import Job
from kai_ray.config import SchedulerConfig
from kai_ray.model import PodGroup, with_changes

PREEMPTION_DELAY_REASON = "PreemptionDelayNotElapsed"


def waiting_since(job: Job) -> float:
    """When the job's current wait began: its creation, or its last eviction if later."""
    evicted = job.group.last_eviction
    return max(job.group.created, evicted) if evicted is not None else job.group.created


def preemption_delay_end(job: Job) -> float | None:
    delay = job.group.preemption_delay_seconds
    if not delay or delay <= 0:
        return None
    return waiting_since(job) + delay


def within_preemption_delay(job: Job, now: float) -> bool:
    end = preemption_delay_end(job)
    return end is not None and now < end


def delay_message(job: Job) -> str:
    """KAI's unschedulable explanation for a job inside its window."""
    end = preemption_delay_end(job)
    delay = job.group.preemption_delay_seconds or 0.0
    return (
        f"{PREEMPTION_DELAY_REASON}: Workload is within its preemption delay window ({go_duration(delay)}) "
        f"and may not trigger evictions before {rfc3339(end or 0.0)}"
    )


def apply_timers(jobs: dict[str, Job], last_start: dict[str, float], config: SchedulerConfig, now: float) -> None:
    """Set each job's aging boost and overrun mark for this session (both off by default)."""
    aging = config.jobAging
    mark_overrun = config.expectedRuntimeExceeded != "ignore"
    if aging is None and not mark_overrun:
        return  # the default: no job's boost or mark can change
    for job in jobs.values():
        if aging is not None and job.active_allocated() == 0:
            waited = max(0.0, now - waiting_since(job))
            job.boost = min(aging.maxBoost, int(waited // aging.interval))
        if mark_overrun:
            job.overrun = is_overrun(job, last_start.get(job.key), now)


def is_overrun(job: Job, started: float | None, now: float) -> bool:
    expected = job.group.expected_runtime_seconds
    if not expected or started is None or job.active_allocated() == 0:
        return False
    return now - started > expected


def may_preempt(preemptor: Job, victim: Job) -> bool:
    """KAI: strictly lower priority. Aging lets an aged job also take newer jobs below its aged
    priority; an overrun victim (preemptFirst) yields to jobs with at least its priority."""
    if victim.priority < preemptor.priority:
        return True
    if victim.overrun and preemptor.priority >= victim.priority:
        return True
    return (
        preemptor.boost > 0
        and victim.priority < preemptor.priority + preemptor.boost
        and (victim.group.created, victim.key) > (preemptor.group.created, preemptor.key)
    )


@dataclass(frozen=True, slots=True)
class JobClock:
    """A pod group's timestamps as KAI keeps them in its annotations (epoch seconds; None: unset)."""

    last_start: float | None
    stale_since: float | None
    last_eviction: float | None


def remember_clocks(
    groups: MutableMapping[str, PodGroup],
    jobs: Iterable[Job],
    last_start: dict[str, float],
    evicted_jobs: set[str],
    now: float,
) -> dict[str, JobClock]:
    """Carry a session's start, staleness and eviction times into the model's pod groups;
    returns the groups whose times changed, for the adapter to write back to the cluster."""
    changed: dict[str, JobClock] = {}
    for job in jobs:
        key = job.key
        group = groups.get(key)
        if group is None:
            continue
        started = last_start.get(key, group.last_start)
        evicted = now if key in evicted_jobs else group.last_eviction
        if started == group.last_start and job.stale_since == group.stale_since and evicted == group.last_eviction:
            continue  # most jobs, most cycles
        clock = JobClock(started, job.stale_since, evicted)
        groups[key] = with_changes(
            group, last_start=clock.last_start, stale_since=clock.stale_since, last_eviction=clock.last_eviction
        )
        changed[key] = clock
    return changed


def go_duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration (``5m0s``, ``1h0m0s``, ``30s``), as KAI's messages do."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    rest = abs(seconds)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:g}s" if secs != int(secs) else f"{int(secs)}s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{sign}{int(minutes)}m{text}"
    return sign + text


def rfc3339(moment: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(math.floor(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
