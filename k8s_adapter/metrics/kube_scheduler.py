"""kube-scheduler's metric names, with kube-scheduler's meaning and labels.

``scheduler_pending_pods{queue}``: kube-scheduler's ``queue`` label names its internal queues,
not KAI queues. kai-ray maps its pending pods onto them:

- ``active``: pods that will be placed as soon as the capacity they were given is released
  (pipelined) -- kube-scheduler would retry them right away;
- ``backoff``: pods of jobs whose victim search (reclaim, preempt, consolidation) waits out a
  backoff after failing -- kube-scheduler's backoffQ;
- ``unschedulable``: pods the last cycle tried to place and left pending;
- ``gated``: pods held by a scheduling gate (kube-scheduler's own meaning), and pods never tried
  because their gang is not complete yet (KAI: "Job is not ready for scheduling"), as
  kube-scheduler never tries pods whose scheduling gates are set.

``scheduler_schedule_attempts_total{result,profile}``: one attempt per pod and outcome, as
kube-scheduler counts them: ``scheduled`` when a bind succeeded, ``error`` when it failed, and
``unschedulable`` when a pod is found unschedulable for a new reason. kube-scheduler does not
retry a pod while nothing relevant changed (it waits for a cluster event or a timeout), so an
unchanged pending pod is one attempt, not one per cycle; kai-ray re-evaluates every pending pod
each cycle but counts a re-evaluation that ends as the last one did as the same attempt.
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult

PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")


def pending_queue(result: CycleResult, pod: str) -> str | None:
    """Which of kube-scheduler's queues this pod of ours would be in, or None if it is not pending."""
    decision = result.decisions.pods.get(pod)
    if decision is None:
        return None
    if decision.status == "Pipelined":
        return "active"
    if decision.status != "Pending":
        return None
    job = result.pod_jobs.get(pod, "")
    if job in result.not_ready_jobs:
        return "gated"
    if job in result.paused_jobs:
        return "backoff"
    return "unschedulable"


class KubeSchedulerMetrics:
    def __init__(self, registry: CollectorRegistry, profile: str) -> None:
        self.profile = profile
        self.pending = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type: active (pipelined, bound once capacity is released), "
            "backoff (victim search backed off), unschedulable, gated (a scheduling gate, or gang not complete).",
            ["queue"],
            registry=registry,
        )
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result: scheduled (bound), unschedulable "
            "(a new reason to wait), error (the bind failed).",
            ["result", "profile"],
            registry=registry,
        )
        self._verdicts: dict[str, str] = {}  # pending pod -> the reason its last counted attempt ended with

    def observe_cycle(self, result: CycleResult) -> None:
        queues: Tally[str] = Tally()
        verdicts: dict[str, str] = {}
        new_attempts = 0
        for pod in result.pod_jobs:
            queue = pending_queue(result, pod)
            if queue is None:
                continue
            queues[queue] += 1
            if queue in ("unschedulable", "backoff"):
                reason = result.decisions.pods[pod].reason
                verdicts[pod] = reason
                if self._verdicts.get(pod) != reason:
                    new_attempts += 1
        self._verdicts = verdicts  # pods no longer pending start afresh
        queues["gated"] += sum(result.gated_by_queue.values())  # never in ``pod_jobs``: no session has them
        for queue in PENDING_QUEUES:
            self.pending.labels(queue).set(queues.get(queue, 0))
        self.attempts.labels("unschedulable", self.profile).inc(new_attempts)

    def observe_binds(self, ok: int, failed: int) -> None:
        self.attempts.labels("scheduled", self.profile).inc(ok)
        self.attempts.labels("error", self.profile).inc(failed)
