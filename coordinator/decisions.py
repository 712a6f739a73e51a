"""A session's outcome, every pod, pod group and queue (docs/architecture.md#decision-output)."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from coordinator.fairshare import RESOURCES
from coordinator.jobs import Job
from coordinator.session import SessionState
from coordinator.statement import Eviction
from coordinator.tasks import Status, Task
from kai_ray.model import Pod, PodState, fast_init


@dataclass(frozen=True, slots=True)
class PodDecision:
    status: str
    node: str | None
    gpu_groups: tuple[str, ...] = ()
    reason: str = ""
    claims: tuple[tuple[str, tuple[str, ...]], ...] = ()  # DRA claims allocated now: name, device keys
    gate: str = ""  # a gated pod: held | removing | foreign (coordinator/admission.py)
    gates: tuple[str, ...] = ()  # its spec.schedulingGates


_make_decision = fast_init(PodDecision)  # one per pod per cycle: see kai_ray.model.records


@dataclass(slots=True)
class Decisions:
    pods: dict[str, PodDecision] = field(default_factory=dict)
    pod_groups: dict[str, PodDecision] = field(default_factory=dict)
    queues: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    evictions: list[tuple[str, str, str | None]] = field(default_factory=list)  # pod, action, preemptor

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": {k: _pod_json(v) for k, v in self.pods.items()},
            "podGroups": {k: {"status": v.status, "reason": v.reason} for k, v in self.pod_groups.items()},
            "queues": self.queues,
        }


def _pod_json(decision: PodDecision) -> dict[str, Any]:
    out: dict[str, Any] = {"status": decision.status, "node": decision.node, "gpuGroups": list(decision.gpu_groups)}
    if decision.reason:
        out["reason"] = decision.reason
    if decision.claims:
        out["claims"] = {name: list(devices) for name, devices in decision.claims}
    if decision.gates:
        out["schedulingGates"] = {"names": list(decision.gates), "state": decision.gate}
    return out


@dataclass(slots=True)
class Settled:
    """What one cycle's ``collect`` leaves the next (the caller keeps it). Decisions that follow
    from records alone: pods the session left as their record says and that wait for nothing
    (running, binding, finished), reused while the record is the same object, and pod groups all
    of whose pods are such pods, reused while the job is the same object (a job is made again
    whenever its group or a member changes). And the last cycle's whole outcome, with the pods
    jobs whose decisions it took from the session rather than from records: when the opener
    says which records changed, only those, the pods of these and what this session may have
    changed are decided again."""

    pods: dict[str, tuple[Pod, PodDecision]] = field(default_factory=dict)
    jobs: dict[str, tuple[Job, PodDecision]] = field(default_factory=dict)
    last: Decisions | None = None
    session_jobs: set[str] = field(default_factory=set)


def collect(
    state: SessionState, evictions: list[Eviction], settled: Settled | None = None, touched: Set[str] = frozenset()
) -> Decisions:
    """Every pod's, pod group's and queue's decision; ``settled`` saves recomputing those that
    follow from records the session did not touch (``touched``: the jobs its statements changed)."""
    known = settled if settled is not None else Settled()
    if known.last is not None and state.changed_pods is not None:
        decisions = _collect_changed(state, known, touched)
    else:
        decisions = _collect_all(state, known, touched)
    queues = state.queues
    for i, name in enumerate(queues.tree.names):
        decisions.queues[name] = {
            "fairShare": {r: _clean(queues.fair_share[i, j]) for j, r in enumerate(RESOURCES)},
            "allocated": {r: _clean(queues.allocated[i, j]) for j, r in enumerate(RESOURCES)},
        }
    decisions.evictions = [(e.task.key, e.action, e.preemptor) for e in evictions]
    known.last = Decisions(decisions.pods, decisions.pod_groups)
    return decisions


def _collect_all(state: SessionState, known: Settled, touched: Set[str]) -> Decisions:
    decisions = Decisions()
    reasons: dict[str, str] = {}  # per job: every pending pod of a gang waits for the same reason
    tasks, pods, jobs_by_task = state.tasks, decisions.pods, state.jobs_by_task
    fresh_pods: dict[str, tuple[Pod, PodDecision]] = {}
    unsettled: set[str] = set()  # jobs with a pod that waits or that the session moved
    pending = PodState.PENDING
    for key, pod in state.all_pods.items():
        task = tasks.get(key)
        if pod.state is not pending and (task is None or _untouched(task)):
            hit = known.pods.get(key)
            if hit is None or hit[0] is not pod:
                hit = (pod, _decide_task(state, task, reasons) if task else _other_pod(state, pod))
            fresh_pods[key] = hit
            pods[key] = hit[1]
            continue
        if task is not None and (job := jobs_by_task.get(key)) is not None:
            unsettled.add(job.key)
        pods[key] = _decide_task(state, task, reasons) if task else _other_pod(state, pod)
    fresh_jobs: dict[str, tuple[Job, PodDecision]] = {}
    for job_key, job in state.jobs.items():
        if job_key in unsettled:
            decisions.pod_groups[job_key] = _decide_job(state, job)
            continue
        hit_job = known.jobs.get(job_key)
        if hit_job is None or hit_job[0] is not job:
            hit_job = (job, _decide_job(state, job))
        fresh_jobs[job_key] = hit_job
        decisions.pod_groups[job_key] = hit_job[1]
    known.pods, known.jobs = fresh_pods, fresh_jobs
    known.session_jobs = state.maybe_changed_keys(set(touched)) | unsettled
    return decisions


def _collect_changed(state: SessionState, known: Settled, touched: Set[str]) -> Decisions:
    """The last outcome, decided again where something may differ: pods whose records changed,
    pending pods, the jobs the last session may have changed (their records rule again now) and
    those this session may have changed, with their pods. A pod whose decision the last session
    made is pending (its record changes when it is bound) or one of those jobs' pods."""
    assert known.last is not None and state.changed_pods is not None
    decisions = Decisions(dict(known.last.pods), dict(known.last.pod_groups))
    reasons: dict[str, str] = {}
    tasks, pods, groups = state.tasks, decisions.pods, decisions.pod_groups
    job_keys = state.maybe_changed_keys(set(touched))
    redo_jobs = job_keys | state.remade_jobs | known.session_jobs
    redo_pods = set(state.changed_pods)  # with the pending pods and the pods of the jobs below
    redo_pods.update(task.key for task in state.pending_at_open or ())
    for job_key in redo_jobs:
        job = state.jobs.get(job_key)
        if job is None:
            groups.pop(job_key, None)
            continue
        redo_pods.update(task.key for task in job.tasks)
        groups[job_key] = _decide_job(state, job)
    for key in redo_pods:
        pod = state.all_pods.get(key)
        if pod is None:
            pods.pop(key, None)
            continue
        task = tasks.get(key)
        pods[key] = _decide_task(state, task, reasons) if task else _other_pod(state, pod)
    known.session_jobs = job_keys
    return decisions


def _clean(value: float) -> float:
    rounded = round(float(value), 9)
    return int(rounded) if rounded.is_integer() else rounded


def _untouched(task: Task) -> bool:
    """The session left the task as its pod record says (and it is not pending)."""
    status = task.status
    return (
        status is task.original_status
        and status is not Status.PENDING
        and task.node == task.original_node
        and not task.claims
        and task.gpu_groups is task.pod.gpu_groups
    )


def _decide_task(state: SessionState, task: Task, reasons: dict[str, str]) -> PodDecision:
    status = task.status
    reason = ""
    if status is Status.PENDING:
        reason = _pending_reason(state, task, reasons)
    if status is Status.RELEASING and task.evicted_in_session:
        # An evicted pod stops where it was when the session began (a pod that an earlier step
        # moved, or pipelined, and a later one evicted is deleted there, not on the node it was
        # pipelined to).
        return _make_decision(status.value, task.original_node, task.pod.gpu_groups, reason)
    if not task.claims or not status.active_allocated:
        return _make_decision(status.value, task.node, task.gpu_groups, reason)
    claims = tuple((g.claim.split("/", 1)[1], tuple(r.key for r in g.allocation.results)) for g in task.claims)
    return PodDecision(status.value, task.node, task.gpu_groups, reason, claims)


def _pending_reason(state: SessionState, task: Task, reasons: dict[str, str]) -> str:
    if task.key in state.pod_notes:
        return state.pod_notes[task.key]
    job = state.jobs_by_task.get(task.key)
    if job is None:
        return "not part of any PodGroup"
    reason = reasons.get(job.key)
    if reason is None:
        reason = reasons[job.key] = job_reason(state, job)
    return reason


def job_reason(state: SessionState, job: Job) -> str:
    """Why the job waits; a Workload API gang's reason names the gang first (its pods name no
    KAI PodGroup a user could look up)."""
    why = _job_reason(state, job)
    return f"{job.group.workload_api}: {why}" if job.group.workload_api else why


def _job_reason(state: SessionState, job: Job) -> str:
    if not state.queues.has(job.queue):
        why = state.unusable_queues.get(job.queue)
        if why is not None:  # it exists, but is not part of the queue tree
            return f"queue {job.queue} is not usable: {why}"
        return f"QueueDoesNotExist: queue {job.queue} does not exist"
    if not state.queues.is_leaf(job.queue):
        return f"queue {job.queue} is not a leaf queue; jobs must name a leaf queue"
    if not job.ready_for_scheduling():
        short = [
            f"{ps.name}: {ps.alive} of {ps.min_available}"
            for ps in job.pod_sets.values()
            if ps.alive < ps.min_available
        ]
        return "waiting for the gang's pods to be created (" + ", ".join(short) + ")"
    if job.fit_errors:
        primary = job.fit_errors.get("allocate")
        others = [f"{action}: {why}" for action, why in job.fit_errors.items() if action != "allocate"]
        parts = ([primary] if primary else []) + others
        return "; ".join(part.rstrip(".") for part in parts[:-1]) + ("; " if len(parts) > 1 else "") + parts[-1]
    return "not scheduled in this session"


def _decide_job(state: SessionState, job: Job) -> PodDecision:
    sets = job.pod_sets
    tasks = next(iter(sets.values())).tasks if len(sets) == 1 else job.tasks
    if len(tasks) == 1 and tasks[0].status is not Status.PENDING:  # what the rules below give it
        return _GROUP_IS[tasks[0].status]
    statuses = [t.status for t in tasks]
    if not statuses:
        return PodDecision("Pending", None, (), "the PodGroup has no pods yet")
    if any(s is Status.PENDING for s in statuses):
        if any(s is not Status.PENDING for s in statuses) and job.gang_satisfied():
            return PodDecision("Running", None, (), "")
        return PodDecision("Pending", None, (), job_reason(state, job))
    for status in (Status.RELEASING, Status.PIPELINED, Status.ALLOCATED, Status.RUNNING):
        if status in statuses:
            return _GROUP_IS[status]
    return _GROUP_IS[statuses[0]]


# A pod group's decision when it is simply in one status: one shared (immutable) record each.
_GROUP_IS = {status: PodDecision(status.value, None) for status in Status}


_OTHER_STATUS = {
    PodState.BINDING: "Binding",
    PodState.RUNNING: "Running",
    PodState.PIPELINED: "Pipelined",
    PodState.RELEASING: "Releasing",
    PodState.SUCCEEDED: "Succeeded",
    PodState.FAILED: "Failed",
    PodState.PENDING: "Pending",
}


def _other_pod(state: SessionState, pod: Pod) -> PodDecision:
    status = _OTHER_STATUS[pod.state]
    reason = ""
    if status == "Pending":
        reason = state.pod_notes.get(pod.key) or (
            f"scheduled by {pod.scheduler_name}, not by {state.config.schedulerName}"
        )
    return PodDecision(status, pod.node, pod.gpu_groups, reason)
