"""Queue-admission gating: which gated pods may have kai-ray's gate removed, and why the rest wait.

A pod created with the gate ``kai.scheduler/queue-admission`` is never placed (the API server
refuses to bind a gated pod) and, gated, is not ``Unschedulable`` to cluster autoscalers. After
each session, the gated pods of this scheduler are judged per pod group, in the session's job
order, against the queue state the session ends with: the gate goes when KAI's capacity check
(limits at every level; quota for non-preemptible work) lets the group's gated pods in. Each
admission is booked before the next group is judged, so one cycle never admits more than fits;
so is the demand of pods admitted earlier that still wait (``reserved``), for a while, so that
groups admitted in successive cycles do not together go over what fits.

The gate is only a cache of that verdict: the allocation-time check stays authoritative, and a
pod whose gate went (or never had one) is scheduled as any other. Pods with another gate are
left to its owner (docs/admission-gating.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from coordinator.decisions import Decisions, PodDecision
from coordinator.gated_demand import gated_request, held_by_us_alone
from coordinator.jobs import missing_group_note
from coordinator.queue_state import QueueState
from coordinator.session import Quota, SessionState
from coordinator.tasks import Status
from kai_ray import labels as L
from kai_ray.model import Pod, PodGroup

HELD = "held"  # kai-ray's gate stays: the queue has no room
REMOVING = "removing"  # kai-ray's gate is being removed this cycle
FOREIGN = "foreign"  # another gate holds the pod: kai-ray leaves it to that gate's owner


@dataclass(slots=True)
class Admission:
    """The gated pods' decisions, their pod groups' reasons, the pods to ungate now, and how many
    of this scheduler's gated pods there are by queue and gate state, and by pod group."""

    pods: dict[str, PodDecision] = field(default_factory=dict)
    pod_groups: dict[str, str] = field(default_factory=dict)  # group -> why its gated pods wait
    ungate: list[str] = field(default_factory=list)
    by_queue: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, held|removing|foreign) -> pods
    by_group: dict[str, int] = field(default_factory=dict)  # pod group -> its gated pods


def admit(state: SessionState, gated: Mapping[str, Pod], groups: Mapping[str, PodGroup]) -> Admission:
    """Judge every gated pod after the session ran (``state`` as its actions left it)."""
    out = Admission()
    _judge(state, gated, groups, out)
    _count(state, gated, groups, out)
    return out


def _judge(state: SessionState, gated: Mapping[str, Pod], groups: Mapping[str, PodGroup], out: Admission) -> None:
    """Each gated pod's decision, and its group's reason, into ``out``."""
    members: dict[str, list[Pod]] = {}
    for pod in gated.values():
        if pod.scheduler_name != state.config.schedulerName:
            why = f"scheduled by {pod.scheduler_name}, not by {state.config.schedulerName}"
            out.pods[pod.key] = _pending(pod, why, FOREIGN)
        elif not held_by_us_alone(pod):
            out.pods[pod.key] = _pending(pod, _foreign_reason(pod), FOREIGN)
        elif pod.pod_group is None:
            out.pods[pod.key] = _pending(pod, _held("not part of any PodGroup yet"), HELD)
        else:
            members.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(pod)
    if not members:
        return
    queues = _with_reserved(state)
    for key in _in_order(state, members):
        pods = sorted(members[key], key=lambda p: p.name)
        group = groups.get(key)
        verdict = _verdict(state, queues, group, pods) if group is not None else missing_group_note(key, pods[0])
        if verdict is None:
            assert group is not None
            queues.add_allocation(group.queue, _request(pods), _preemptible(group))
            out.ungate.extend(p.key for p in pods)
            why = f"SchedulingGated: queue {group.queue} has room; removing the gate {L.ADMISSION_GATE}"
            out.pods.update((p.key, _pending(p, why, REMOVING)) for p in pods)
            out.pod_groups[key] = why
            continue
        out.pod_groups[key] = _held(verdict)
        out.pods.update((p.key, _pending(p, _held(verdict), HELD)) for p in pods)


def _count(state: SessionState, gated: Mapping[str, Pod], groups: Mapping[str, PodGroup], out: Admission) -> None:
    """This scheduler's gated pods by queue (their PodGroup's, else their queue label) and gate
    state, and by pod group: what the metrics and KAI's NotReady event count (other gates too)."""
    by_queue: Counter[tuple[str, str]] = Counter()
    by_group: Counter[str] = Counter()
    for pod in gated.values():
        if pod.scheduler_name != state.config.schedulerName:
            continue
        key = f"{pod.namespace}/{pod.pod_group}" if pod.pod_group else None
        group = groups.get(key) if key is not None else None
        queue = group.queue if group is not None else pod.queue_label or ""
        by_queue[(queue, out.pods[pod.key].gate)] += 1
        if group is not None:
            by_group[group.key] += 1
    out.by_queue, out.by_group = dict(by_queue), dict(by_group)


def with_gated(decisions: Decisions, admission: Admission) -> Decisions:
    """The session's decisions with the gated pods' added, on copies: ``collect`` keeps its own
    dicts as the next cycle's starting point, where a pod whose gate goes must not linger. A group
    whose pods all wait takes its gated pods' reason (it has no other), one that runs keeps its own."""
    groups = dict(decisions.pod_groups)
    for key, why in admission.pod_groups.items():
        current = groups.get(key)
        if current is None or current.status == "Pending":
            groups[key] = PodDecision("Pending", None, (), why)
    return Decisions({**decisions.pods, **admission.pods}, groups, decisions.queues, decisions.evictions)


def _verdict(state: SessionState, queues: QueueState, group: PodGroup, pods: list[Pod]) -> str | None:
    """None when the group's gated pods fit their queue; otherwise why not, in KAI's words."""
    if not queues.has(group.queue):
        why = state.unusable_queues.get(group.queue)
        if why is not None:
            return f"queue {group.queue} is not usable: {why}"
        return f"QueueDoesNotExist: queue {group.queue} does not exist"
    if not queues.is_leaf(group.queue):
        return f"queue {group.queue} is not a leaf queue; jobs must name a leaf queue"
    subject = "non-preemptible job" if not group.semi_preemptible else "the job's non-preemptible minimum"
    verdict = queues.check_capacity(group.queue, _request(pods), _preemptible(group), subject=subject)
    return None if verdict.ok else f"{verdict.reason}: {verdict.message}"


def _preemptible(group: PodGroup) -> bool:
    # A semi-preemptible group's gated pods are judged as its protected minimum: the stricter check.
    return group.preemptible and not group.semi_preemptible


def _request(pods: list[Pod]) -> Quota:
    gpu = cpu = memory = 0.0
    for pod in pods:
        g, c, m = gated_request(pod)  # as a job's own capacity check counts it, before any node is chosen
        gpu += g
        cpu += c
        memory += m
    return (gpu, cpu, memory)


def _with_reserved(state: SessionState) -> QueueState:
    """The session's queue state on copies, with the demand of pods admitted within the last
    ``queueAdmissionGating.reservationTimeout`` that are still pending booked as if allocated."""
    # Long enough for an autoscaler to bring a node, short enough that a pod stuck for another
    # reason (an affinity no node meets) does not hold its queue's gated pods back for good.
    timeout = state.config.queueAdmissionGating.reservationTimeout
    q = state.queues
    queues = QueueState(q.tree, q.fair_share, q.request, q.allocated.copy(), q.allocated_np.copy(), q.total)
    for task in state.tasks.values():
        if task.status is not Status.PENDING:
            continue
        admitted = _admitted_at(task.pod)
        job = state.jobs_by_task.get(task.key)
        if admitted is None or job is None or not queues.has(job.queue) or state.now - admitted > timeout:
            continue
        queues.add_allocation(job.queue, state.requested_quota(task), job.preemptible and not job.semi_preemptible)
    return queues


def _admitted_at(pod: Pod) -> float | None:
    """When kai-ray removed the pod's gate (RFC 3339, as it writes KAI's other timestamps)."""
    text = pod.annotations.get(L.ADMITTED_ANNOTATION)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None  # not ours to refuse: the pod just reserves nothing
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _in_order(state: SessionState, members: Mapping[str, list[Pod]]) -> list[str]:
    """The groups in the session's job order (KAI orders its ungate pass the same way); groups the
    session has no job for (all their pods gated and no PodGroup object) after them, by name."""
    known = [job.key for job in state.in_session_order(members)]
    seen = set(known)
    return known + sorted(key for key in members if key not in seen)


def _foreign_reason(pod: Pod) -> str:
    others = [gate for gate in pod.scheduling_gates if gate != L.ADMISSION_GATE]
    plural = "s" if len(others) > 1 else ""
    return (
        f"SchedulingGated: held by the scheduling gate{plural} {', '.join(others)}; placed once its owner removes them"
    )


def _held(why: str) -> str:
    return f"{why}; held by the scheduling gate {L.ADMISSION_GATE}, hidden from cluster autoscalers until it can run"


def _pending(pod: Pod, reason: str, gate: str) -> PodDecision:
    return PodDecision("Pending", None, (), reason, gate=gate, gates=pod.scheduling_gates)
