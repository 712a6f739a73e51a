"""Label and annotation keys of KAI's API that kai-ray reads and writes."""

import re
from collections.abc import Mapping

# A qualified label key: optional DNS-subdomain prefix and '/', then a name (KAI's CRD pattern).
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


def is_label_key(text: str) -> bool:
    """Whether ``text`` can be a Kubernetes label key."""
    return bool(_LABEL_KEY.match(text))


QUEUE_LABEL = "kai.scheduler/queue"
LEGACY_QUEUE_LABEL = "runai/queue"
PROJECT_LABEL = "project"  # the queue when no queue label is set (KAI's pod grouper)
NODE_POOL_LABEL = "kai.scheduler/node-pool"
POD_GROUP_ANNOTATION = "pod-group-name"
# KAI's design for the Kubernetes Workload API: "true" on a pod ignores its Workload API group.
IGNORE_WORKLOAD_API_ANNOTATION = "kai.scheduler/ignore-workload-api"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PRIORITY_CLASS_LABEL = "priorityClassName"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"
GPU_FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
GPU_GROUP_LABEL = "runai-gpu-group"
GPU_MEMORY_NODE_LABEL = "nvidia.com/gpu.memory"
# KAI's default for its --mig-worker-node-label-key: "true" marks a MIG-enabled node.
MIG_ENABLED_NODE_LABEL = "node-role.kubernetes.io/mig-enabled"
MIG_STRATEGY_NODE_LABEL = "nvidia.com/mig.strategy"  # single | mixed, set by the GPU operator
GPU_FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
RECEIVED_RESOURCE_TYPE_ANNOTATION = "received-resource-type"  # Regular | Fraction, written when binding
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"  # name prefix of a fraction's ConfigMaps
APP_LABEL = "app"
RESERVATION_APP = "kai-resource-reservation"  # app label of GPU reservation pods
RESERVATION_NAMESPACE = "kai-resource-reservation"
STALE_TIMESTAMP_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
STALENESS_GRACE_ANNOTATION = "kai.scheduler/staleness-grace-period"
LAST_EVICTION_ANNOTATION = "kai.scheduler/last-eviction-timestamp"
PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
EXPECTED_RUNTIME_ANNOTATION = "kai.scheduler/expected-runtime"  # beyond KAI: the name of its PR #941
# kai-ray's own (KAI has no reservations): how long this gang waits before it reserves nodes,
# overriding the scheduler's ``reservation.after``; negative: never (docs/reservation-backfill.md).
RESERVATION_AFTER_ANNOTATION = "kai-ray.io/reservation-after"
# KAI's queue-admission gate (its design's locked name): a pod created with it waits, hidden from
# cluster autoscalers, until the scheduler removes it for a queue with room (docs/admission-gating.md).
ADMISSION_GATE = "kai.scheduler/queue-admission"
ADMITTED_ANNOTATION = "kai.scheduler/queue-admitted-timestamp"  # stamped when the gate is removed
KUBEFLOW_ROLE_LABEL = "training.kubeflow.org/job-role"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"

DEFAULT_QUEUE = "default-queue"
DEFAULT_PARENT_QUEUE = "default-parent-queue"
DEFAULT_SCHEDULER_NAME = "kai-scheduler"
DEFAULT_QUEUE_PRIORITY = 100
DEFAULT_JOB_PRIORITY = 50  # KAI's fallback when no PriorityClass applies
PREEMPTIBLE_BELOW = 100  # priority < 100 is preemptible unless said otherwise
# The values of spec.preemptibility and of the preemptibility label. semi-preemptible is KAI's
# designed third mode: non-preemptible up to the gang minimum, preemptible beyond it.
PREEMPTIBLE, NON_PREEMPTIBLE, SEMI_PREEMPTIBLE = "preemptible", "non-preemptible", "semi-preemptible"
PREEMPTIBILITIES = (PREEMPTIBLE, NON_PREEMPTIBLE, SEMI_PREEMPTIBLE)
DEFAULT_GPU_MEMORY_MIB = 100

# KAI's priority classes (its chart installs them; so do kai-ray's chart and `kai-ray up`):
# below PREEMPTIBLE_BELOW a job may be preempted unless its PodGroup says otherwise.
KAI_PRIORITY_CLASSES = (
    ("train", 50, "Training: preemptible; the default for batch work."),
    ("build-preemptible", 75, "Interactive build work that may be preempted."),
    ("build", 100, "Interactive build work: non-preemptible, uses in-quota resources only."),
    ("inference", 125, "Inference: non-preemptible, uses in-quota resources only."),
)


def is_reservation_pod(labels: Mapping[str, str]) -> bool:
    """A GPU reservation pod (KAI's binder makes them): its device is counted through the shared
    GPU group it holds, so the pod itself is not scheduled or counted as a pod."""
    return labels.get(APP_LABEL) == RESERVATION_APP
