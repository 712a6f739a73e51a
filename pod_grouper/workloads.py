"""KAI's pod-grouper rules per workload kind: how big the gang is, its sub-groups, its topology.

Pure functions of the workload's top owner object (and the pod being grouped), so the running
scheduler's grouper (``pod_grouper/live.py``, which fetches owners through the API) and the
snapshot reader (which finds them in the snapshot) decide alike:

- every kind: the top owner's ``kai.scheduler/topology``, ``-required-placement`` and
  ``-preferred-placement`` annotations become the PodGroup's ``topologyConstraint``;
- batch Job: ``kai.scheduler/batch-min-member``, else 1;
- Kubeflow TFJob, XGBoostJob, JAXJob, MPIJob: ``runPolicy.schedulingPolicy.minAvailable``, else
  every replica of every replica type;
- PyTorchJob: the same, with ``elasticPolicy.minReplicas`` taking the place of the replica count
  (and ``minAvailable`` still winning); sub-groups ``master`` and ``worker``, the workers split into
  segments of ``kai.scheduler/segment-size`` pods, each with the ``segment-topology-*`` constraint;
- Kubeflow Notebook: 1, priority class ``build``;
- Knative Service: the revision's ``autoscaling.knative.dev/min-scale`` (1 when unset), one
  PodGroup per revision, priority class ``inference``;
- Spark: every pod of an application (labels ``spark-app-name`` and ``spark-app-selector``) in one
  PodGroup named after the selector;
- LeaderWorkerSet: one PodGroup per replica group (``<pg>-group-<index>``) of ``size`` pods (only
  the leader while it is unscheduled under ``LeaderReady``), sub-groups ``leader`` and ``workers``,
  or segments of ``subGroupPolicy.subGroupSize`` (or ``kai.scheduler/segment-size``) with the
  leader in the first segment (``LeaderWorker``) or apart (``LeaderExcluded``);
- JobSet, RayCluster and RayJob as before (``gang_size``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kai_ray.model import SubGroup, TopologyConstraint

JSON = Mapping[str, Any]
TOPOLOGY = "kai.scheduler/topology"
REQUIRED = "kai.scheduler/topology-required-placement"
PREFERRED = "kai.scheduler/topology-preferred-placement"
SEGMENT_SIZE = "kai.scheduler/segment-size"
SEGMENT_REQUIRED = "kai.scheduler/segment-topology-required-placement"
SEGMENT_PREFERRED = "kai.scheduler/segment-topology-preferred-placement"
BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
KNATIVE_REVISION_LABEL = "serving.knative.dev/revision"
KNATIVE_MIN_SCALE = "autoscaling.knative.dev/min-scale"
SPARK_APP_LABEL, SPARK_SELECTOR_LABEL = "spark-app-name", "spark-app-selector"
MAX_SEGMENTS = 10_000
REPLICA_SPECS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}
DEFAULT_PRIORITY = {"Notebook": "build", "Service": "inference", "Revision": "inference"}


class WorkloadError(ValueError):
    """The workload cannot be grouped as written (KAI's grouper refuses it too)."""


@dataclass(frozen=True, slots=True)
class WorkloadGroup:
    min_member: int
    sub_groups: tuple[SubGroup, ...] = ()
    min_sub_group: int | None = None
    topology: TopologyConstraint | None = None
    subgroup: str | None = None  # the sub-group the grouped pod joins (its subgroup-name label)
    priority_class: str | None = None  # the kind's default when the workload names none
    name: str | None = None  # a PodGroup name other than pg-<top owner>-<uid>
    notes: tuple[str, ...] = field(default=())


def workload_group(kind: str, owner: JSON, pod: JSON, related: JSON | None = None) -> WorkloadGroup:
    """KAI's grouping of ``pod`` whose top owner is ``owner`` (of ``kind``). ``related`` is a
    further object a kind needs (a Knative Service's revision)."""
    topology = _topology(_annotations(owner))
    priority = DEFAULT_PRIORITY.get(kind)
    if _is_spark(pod):
        return WorkloadGroup(1, topology=topology, name=_labels(pod)[SPARK_SELECTOR_LABEL])
    if kind == "Job":
        return WorkloadGroup(_batch_min_member(owner), topology=topology)
    if kind == "PyTorchJob":
        return _pytorch(owner, pod, topology)
    if kind in REPLICA_SPECS:
        return WorkloadGroup(_kubeflow_min(owner, kind), topology=topology, notes=_unread_segments(owner, kind))
    if kind == "LeaderWorkerSet":
        return _leader_worker_set(owner, pod, topology)
    if kind == "Service" and related is not None:  # Knative: one gang per revision
        meta = related.get("metadata") or {}
        scale = str(_annotations(related).get(KNATIVE_MIN_SCALE, "1"))
        minimum = int(scale) if scale.isdigit() else 1
        return WorkloadGroup(
            max(minimum, 1),
            topology=topology,
            priority_class=priority,
            name=_pg_name(meta.get("name"), meta.get("uid")),
        )
    return WorkloadGroup(gang_size(kind, owner), topology=topology, priority_class=priority)


def gang_size(kind: str, owner: JSON) -> int:
    """The gang of the kinds whose sub-groups kai-ray does not build (JobSet, LWS, Ray)."""
    spec = owner.get("spec") or {}
    override = _annotations(owner).get(BATCH_MIN_MEMBER)
    if override and str(override).isdigit():
        return max(1, int(override))
    if kind in ("RayCluster", "RayJob"):
        cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
        workers = (cluster or {}).get("workerGroupSpecs") or []
        return 1 + sum(int(w.get("minReplicas") or w.get("replicas") or 0) for w in workers)
    if kind == "JobSet":
        total = 0
        for job in spec.get("replicatedJobs") or []:
            parallelism = ((job.get("template") or {}).get("spec") or {}).get("parallelism") or 1
            total += int(job.get("replicas") or 1) * int(parallelism)
        return max(total, 1)
    if kind == "LeaderWorkerSet":
        return int(((spec.get("leaderWorkerTemplate") or {}).get("size")) or 1)
    return 1


# ---------------------------------------------------------------------------- kinds
def _batch_min_member(owner: JSON) -> int:
    raw = _annotations(owner).get(BATCH_MIN_MEMBER)
    if raw is None:
        return 1
    try:
        return int(str(raw))
    except ValueError:
        raise WorkloadError(f"{BATCH_MIN_MEMBER}: not a whole number: {raw!r}") from None


def _replicas(owner: JSON, kind: str) -> dict[str, int]:
    specs = (owner.get("spec") or {}).get(REPLICA_SPECS[kind])
    if not isinstance(specs, Mapping) or not specs:
        raise WorkloadError(f"spec.{REPLICA_SPECS[kind]}: missing")
    out: dict[str, int] = {}
    for name, spec in specs.items():
        replicas = (spec or {}).get("replicas", 1)  # the training operator defaults replicas to 1
        if not isinstance(replicas, int) or replicas <= 0:
            raise WorkloadError(f"spec.{REPLICA_SPECS[kind]}.{name}.replicas: must be at least 1, got {replicas!r}")
        out[str(name)] = replicas
    return out


def _scheduling_min(owner: JSON) -> int | None:
    value = (((owner.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}).get("minAvailable")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _kubeflow_min(owner: JSON, kind: str) -> int:
    explicit = _scheduling_min(owner)
    return explicit if explicit is not None else sum(_replicas(owner, kind).values())


def _pytorch(owner: JSON, pod: JSON, topology: TopologyConstraint | None) -> WorkloadGroup:
    replicas = _replicas(owner, "PyTorchJob")
    minimum = sum(replicas.values())
    elastic = ((owner.get("spec") or {}).get("elasticPolicy") or {}).get("minReplicas")
    if isinstance(elastic, int) and not isinstance(elastic, bool):
        minimum = elastic
    explicit = _scheduling_min(owner)
    if explicit is not None:
        minimum = explicit
    masters = replicas.get("Master", 0)
    subs: list[SubGroup] = []
    if masters:
        subs.append(SubGroup("master", masters))
    role = _labels(pod).get(REPLICA_TYPE_LABEL, "")
    subgroup = "master" if role == "master" and masters else None
    if "Worker" in replicas:
        worker_min = max(0, minimum - masters)
        segment_subs, segment = _segments(owner, pod, replicas["Worker"], worker_min, topology)
        subs.extend(segment_subs)
        if role == "worker":
            subgroup = segment
    return WorkloadGroup(minimum, tuple(subs), topology=topology, subgroup=subgroup)


def _segments(
    owner: JSON, pod: JSON, workers: int, worker_min: int, topology: TopologyConstraint | None
) -> tuple[list[SubGroup], str]:
    """The worker sub-group, split into segments when the worker template asks for them."""
    template = (
        (((owner.get("spec") or {}).get("pytorchReplicaSpecs") or {}).get("Worker") or {}).get("template")
    ) or {}
    template_notes = _annotations(template)
    pod_notes = _annotations(pod)

    def worker_value(key: str) -> str:
        return str(pod_notes.get(key) or template_notes.get(key) or "")

    raw_size = worker_value(SEGMENT_SIZE)
    if not raw_size:
        return [SubGroup("worker", worker_min)], "worker"
    if not raw_size.isdigit() or int(raw_size) <= 0:
        raise WorkloadError(f"{SEGMENT_SIZE}: must be a positive whole number, got {raw_size!r}")
    size = int(raw_size)
    count = -(-workers // size)
    if count > MAX_SEGMENTS:
        raise WorkloadError(f"{SEGMENT_SIZE}: {count} segments, more than {MAX_SEGMENTS}")
    topology_name = worker_value(TOPOLOGY) or (topology.topology if topology else "")
    required, preferred = worker_value(SEGMENT_REQUIRED), worker_value(SEGMENT_PREFERRED)
    constraint = (
        TopologyConstraint(topology_name, required, preferred) if topology_name and (required or preferred) else None
    )
    mandatory = -(-worker_min // size)
    subs = [SubGroup("worker", 0, min_sub_group=count)]
    partial = workers % size
    for i in range(count):
        minimum = size if i < mandatory else 0
        if minimum and partial and i == count - 1:
            minimum = partial
        subs.append(SubGroup(f"worker-{i}", minimum, parent="worker", topology=constraint))
    raw_index = _labels(pod).get(REPLICA_INDEX_LABEL, "")
    if _labels(pod).get(REPLICA_TYPE_LABEL) == "worker" and not raw_index.isdigit():
        raise WorkloadError(f"pod label {REPLICA_INDEX_LABEL}: a worker needs its replica index, got {raw_index!r}")
    segment = f"worker-{int(raw_index) // size}" if raw_index.isdigit() else "worker"
    return subs, segment


LWS_WORKER_INDEX, LWS_GROUP_INDEX = (
    "leaderworkerset.sigs.k8s.io/worker-index",
    "leaderworkerset.sigs.k8s.io/group-index",
)
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"


def _leader_worker_set(owner: JSON, pod: JSON, topology: TopologyConstraint | None) -> WorkloadGroup:
    template = (owner.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = template.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise WorkloadError(f"spec.leaderWorkerTemplate.size: must be at least 1, got {size!r}")
    labels = _labels(pod)
    raw = labels.get(LWS_WORKER_INDEX, "")
    if raw and not raw.isdigit():
        raise WorkloadError(f"pod label {LWS_WORKER_INDEX}: not a whole number: {raw!r}")
    leader = raw == "0"
    minimum = size
    policy = (owner.get("spec") or {}).get("startupPolicy") or "LeaderCreated"
    if policy == "LeaderReady" and leader and not (pod.get("spec") or {}).get("nodeName"):
        minimum = 1  # the workers are created once the leader is ready
    elif policy not in ("LeaderCreated", "LeaderReady"):
        raise WorkloadError(f"spec.startupPolicy: unknown policy {policy!r}")
    group = labels.get(LWS_GROUP_INDEX, "")
    meta = owner.get("metadata") or {}
    name = f"{_pg_name(meta.get('name'), meta.get('uid'))}-group-{group}" if group.isdigit() else None
    subs, subgroup = _lws_sub_groups(owner, pod, template, size, int(raw or 0), leader, topology)
    return WorkloadGroup(minimum, tuple(subs), topology=topology, subgroup=subgroup, name=name)


def _lws_sub_groups(
    owner: JSON, pod: JSON, template: JSON, size: int, index: int, leader: bool, topology: TopologyConstraint | None
) -> tuple[list[SubGroup], str]:
    worker_template = template.get("workerTemplate") or {}
    segment = (template.get("subGroupPolicy") or {}).get("subGroupSize")
    if segment is None:
        segment = _annotations(owner).get(SEGMENT_SIZE) or _annotations(worker_template).get(SEGMENT_SIZE)
    if segment is None:
        subs = [SubGroup("leader", 1)] + ([SubGroup("workers", size - 1)] if size > 1 else [])
        return subs, "leader" if leader else "workers"
    if not str(segment).isdigit() or not 1 < int(segment) <= size:
        raise WorkloadError(f"segment size must be more than 1 and at most the group size {size}, got {segment!r}")
    seg = int(segment)
    divisible = (size - 1) % seg == 0

    def segment_of(worker: int) -> int:
        if worker == 0:
            return 0
        return (worker - 1) // seg if divisible else worker // seg

    count = segment_of(size - 1) + 1
    pod_notes, template_notes = _annotations(pod), _annotations(worker_template)
    name = str(pod_notes.get(TOPOLOGY) or template_notes.get(TOPOLOGY) or (topology.topology if topology else ""))
    required = str(pod_notes.get(SEGMENT_REQUIRED) or template_notes.get(SEGMENT_REQUIRED) or "")
    preferred = str(pod_notes.get(SEGMENT_PREFERRED) or template_notes.get(SEGMENT_PREFERRED) or "")
    constraint = TopologyConstraint(name, required, preferred) if name and (required or preferred) else None
    sizes = [sum(1 for w in range(size) if segment_of(w) == i) for i in range(count)]
    policy = (template.get("subGroupPolicy") or {}).get("subGroupPolicyType") or "LeaderWorker"
    if policy == "LeaderExcluded":
        if not divisible:
            raise WorkloadError(f"LeaderExcluded needs size - 1 ({size - 1}) divisible by the segment size {seg}")
        sizes[0] -= 1  # the leader sits apart
        subs = [SubGroup("leader", 1)] + [SubGroup(f"segment-{i}", n, topology=constraint) for i, n in enumerate(sizes)]
        return subs, "leader" if leader else f"segment-{segment_of(index)}"
    subs = [
        SubGroup("segment-0", 0, min_sub_group=2, topology=constraint),
        *(SubGroup(f"segment-{i}", n, topology=constraint) for i, n in enumerate(sizes) if i),
        SubGroup("leader", 1, parent="segment-0"),
        SubGroup("workers", sizes[0] - 1, parent="segment-0"),
    ]
    mine = "leader" if leader else ("workers" if segment_of(index) == 0 else f"segment-{segment_of(index)}")
    return subs, mine


def _unread_segments(owner: JSON, kind: str) -> tuple[str, ...]:
    """Segment annotations where KAI does not read them (only PyTorchJob workers and LWS)."""
    specs = (owner.get("spec") or {}).get(REPLICA_SPECS[kind]) or {}
    asked = [name for name, spec in specs.items() if SEGMENT_SIZE in _annotations((spec or {}).get("template") or {})]
    if not asked:
        return ()
    return (
        f"{kind} {(owner.get('metadata') or {}).get('name')}: {SEGMENT_SIZE} on {', '.join(asked)} is not read "
        "(as in KAI, segments are made for PyTorchJob workers and LeaderWorkerSets only; write the sub-groups "
        "in a PodGroup instead)",
    )


# ---------------------------------------------------------------------------- helpers
def _topology(annotations: Mapping[str, Any]) -> TopologyConstraint | None:
    name = str(annotations.get(TOPOLOGY) or "")
    if not name:
        return None
    return TopologyConstraint(name, str(annotations.get(REQUIRED) or ""), str(annotations.get(PREFERRED) or ""))


def _annotations(obj: JSON) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _labels(obj: JSON) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _is_spark(pod: JSON) -> bool:
    labels = _labels(pod)
    return SPARK_APP_LABEL in labels and bool(labels.get(SPARK_SELECTOR_LABEL))


def _pg_name(name: Any, uid: Any) -> str:
    return f"pg-{name}-{uid}" if uid else f"pg-{name}"
