"""KAI's wording for what the scheduler writes on objects: reasons, event texts, condition messages.

Tools and runbooks written for KAI match on these (``Unschedulable`` events, the
``UnschedulableOnNodePool`` condition's reasons, ``Evict`` events and their annotations), so
kai-ray writes the same words (KAI's pkg/scheduler/cache/status_updater and api/unschedule_info).
"""

from __future__ import annotations

from collections.abc import Mapping

# KAI's unschedulable reason codes; a decision reason that starts with one keeps it, any other
# reason is KAI's generic PodSchedulingErrors.
REASON_CODES = ("OverLimit", "NonPreemptibleOverQuota", "QueueDoesNotExist", "PreemptionDelayNotElapsed")
GENERIC_CODE = "PodSchedulingErrors"
DEFAULT_POD_ERROR = "Unable to schedule pod"

# Event reasons (KAI's, and the core API's PodReasonUnschedulable).
UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
FAILED_BINDING = "FailedBinding"
BINDING_ERROR = "BindingError"  # the PodScheduled condition's reason after a failed bind
PIPELINED = "Pipelined"
EVICT = "Evict"
NOT_READY = "NotReady"
CONDITION_TYPE = "UnschedulableOnNodePool"

# KAI's annotations on an Evict event.
EVICTED_COUNT = "num-evicted-pods"
EVICTOR_ACTION = "evictor-action-type"
EVICTOR_NAME = "evictor-pod-group-name"
EVICTOR_NAMESPACE = "evictor-pod-group-namespace"


def explanation(reason: str) -> tuple[str, str]:
    """A decision reason as KAI's (code, message): ``OverLimit: ...`` keeps its code."""
    head, sep, rest = reason.partition(": ")
    if sep and head in REASON_CODES:
        return head, rest
    return GENERIC_CODE, reason or DEFAULT_POD_ERROR


def fit_message(reason: str) -> str:
    """KAI's JobFitErrorsToMessage for one fit error: ``<code>: <message>.``"""
    code, message = explanation(reason)
    return f"{code}: {message}" + ("" if message.endswith(".") else ".")


def scheduled(pod: str, node: str, node_pool: str) -> str:
    namespace, _, name = pod.partition("/")
    return f"Successfully assigned pod {namespace}/{name} to node {node} at node-pool {node_pool}"


def failed_binding(pod: str, node: str, why: str) -> str:
    return f"Failed to bind pod {pod} to node {node}. {why}"


def pipelined(pod: str, node: str) -> str:
    return f"Pod {pod} was pipelined to node {node}"


def not_ready(minimum: int, existing: int, gated: int) -> str:
    """KAI's NotReady event: the gang has fewer pods ready than its minimum. ``existing`` counts
    the gated ones too (KAI's alive pods), which are not ready until their gates go."""
    return f"Job is not ready for scheduling. Waiting for {minimum} pods, currently {existing} exist, {gated} are gated"


def eviction(action: str, pod: str, preemptor: str | None, min_member: int, details: str = "") -> str:
    """KAI's message for a pod evicted by ``action`` (for ``preemptor``, a pod group key)."""
    if action == "preempt":
        return f"Pod {pod} was preempted by higher priority workload {preemptor}"
    if action == "reclaim":
        text = f"Pod {pod} was preempted by workload {preemptor}."
        return f"{text}\n{details}" if details else text
    if action == "consolidation":
        return f"Pod {pod} was preempted and rescheduled due to bin packing (resource consolidation) procedure"
    if action == "stalegangeviction":
        return (
            f"Workload doesn't meet the minimum required number of pods ({min_member}), evicting remaining pod: {pod}"
        )
    if action == "runtimelimit":  # beyond KAI: expectedRuntimeExceeded: stop
        return (
            f"Pod {pod} was stopped: its workload ran longer than its expected runtime (kai.scheduler/expected-runtime)"
        )
    return f"Pod {pod} was evicted by the {action} action"  # an action without wording of its own yet


def queue_details(
    name: str, allocated: Mapping[str, float], quota: Mapping[str, float], share: Mapping[str, float], priority: int
) -> str:
    """KAI's line about a queue in a reclaim message (amounts: gpu devices, cpu millicores, memory bytes)."""
    return (
        f"{name} uses <{_amounts(allocated)}> with a quota of <{_amounts(quota)}>, "
        f"fair-share of <{_amounts(share)}> and queue priority of <{priority}>."
    )


def _amounts(values: Mapping[str, float]) -> str:
    def show(v: float) -> str:
        return "unlimited" if v == -1 else f"{v:g}"

    gpu, cpu, memory = values.get("gpu", 0.0), values.get("cpu", 0.0), values.get("memory", 0.0)
    cores = cpu if cpu == -1 else cpu / 1000
    gigabytes = memory if memory == -1 else memory / 1e9
    return f"GPUs: {show(gpu)}, CPU: {show(cores)} (cores), memory: {show(gigabytes)} (GB)"
