"""Small topology clusters written as the manifests a user hands to ``kai-ray schedule``.

A case lists a Topology's levels, nodes (GPUs and labels), and jobs: each a PodGroup spec
(``minMember``, ``minSubGroup``, ``subGroups``, ``topologyConstraint`` exactly as in YAML) with
its pods, running ones on a node. ``decide_case`` turns it into a snapshot through the same
readers as the CLI and runs the session ``schedule`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from coordinator.decisions import Decisions
from kai_ray.app.cli.schedule_cmd import decide
from kai_ray.config import SchedulerConfig
from kai_ray.io.snapshot_loader import snapshot_from_documents
from kai_ray.model import ClusterSnapshot

Doc = dict[str, Any]
NOW = datetime(2025, 1, 1, tzinfo=UTC)
TOPOLOGY = "cluster-topology"
AFFINITY_KEY = "kai.test/affinity"


@dataclass(frozen=True)
class Pod:
    subgroup: str | None = None
    node: str | None = None  # set: the pod runs there
    affinity: str | None = None  # required node affinity: AFFINITY_KEY In [affinity]
    gpus: float | None = None  # else the job's


@dataclass(frozen=True)
class Job:
    name: str
    gpus: float
    pods: tuple[Pod, ...]
    spec: Doc = field(default_factory=dict)  # extra PodGroup spec (minMember defaults to the pod count)
    priority_class: str = "train"
    queue: str = "queue0"


def topology(levels: tuple[str, ...], name: str = TOPOLOGY) -> Doc:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in levels]},
    }


def node(name: str, gpus: int, labels: dict[str, str], cpu: str = "64", memory: str = "512Gi") -> Doc:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}},
    }


def queues(gpus: float = 1000) -> list[Doc]:
    def queue(name: str, parent: str | None) -> Doc:
        resources = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
        spec: Doc = {"resources": resources}
        if parent:
            spec["parentQueue"] = parent
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}

    return [queue("department-a", None), queue("queue0", "department-a")]


PRIORITY_CLASSES = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
    for n, v in (("train", 50), ("build", 100), ("inference", 125))
]


def job_docs(job: Job, order: int) -> list[Doc]:
    spec: Doc = {"queue": job.queue, "priorityClassName": job.priority_class, **job.spec}
    if "minMember" not in spec and "minSubGroup" not in spec and "subGroups" not in spec:
        spec["minMember"] = len(job.pods)
    created = NOW - timedelta(hours=1) + timedelta(seconds=order)
    docs: list[Doc] = [
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": "default", "creationTimestamp": _ts(created)},
            "spec": spec,
        }
    ]
    for i, pod in enumerate(job.pods):
        docs.append(pod_doc(job, i, pod, created + timedelta(milliseconds=i)))
    return docs


def pod_doc(job: Job, index: int, pod: Pod, created: datetime) -> Doc:
    gpus = job.gpus if pod.gpus is None else pod.gpus
    labels = {"kai.scheduler/subgroup-name": pod.subgroup} if pod.subgroup else {}
    meta: Doc = {
        "name": f"{job.name}-{index}",
        "namespace": "default",
        "uid": f"{job.name}-{index:04d}",
        "creationTimestamp": _ts(created),
        "labels": labels,
        "annotations": {"pod-group-name": job.name},
    }
    spec: Doc = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(int(gpus))}}}],
    }
    if pod.affinity:
        term = {"matchExpressions": [{"key": AFFINITY_KEY, "operator": "In", "values": [pod.affinity]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    status: Doc = {"phase": "Pending"}
    if pod.node:
        spec["nodeName"] = pod.node
        status = {"phase": "Running"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def documents(levels: tuple[str, ...], nodes: dict[str, tuple[int, dict[str, str]]], jobs: list[Job]) -> list[Doc]:
    docs: list[Doc] = [*PRIORITY_CLASSES, *queues()]
    if levels:
        docs.append(topology(levels))
    docs.extend(node(name, gpus, labels) for name, (gpus, labels) in nodes.items())
    for i, job in enumerate(jobs):
        docs.extend(job_docs(job, i))
    return docs


def snapshot(docs: list[Doc]) -> ClusterSnapshot:
    return snapshot_from_documents(docs, "<test>")


def decide_docs(docs: list[Doc], actions: tuple[str, ...] = ("allocate",), shards: int = 1) -> Decisions:
    return decide(snapshot(docs), SchedulerConfig(), NOW.timestamp(), actions, shards)
