"""Kubernetes manifests as plain dicts, for tests that feed files to the loader or the CLI.

Each builder returns the object as ``kubectl get -o yaml`` would print it (only the fields
kai-ray reads); ``write`` puts a list of them into a multi-document YAML file or a List.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]
UNLIMITED_RESOURCES = {r: {"quota": -1, "overQuotaWeight": 1, "limit": -1} for r in ("gpu", "cpu", "memory")}


def node(
    name: str,
    gpu: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    ready: bool = True,
    labels: dict[str, str] | None = None,
) -> Manifest:
    allocatable: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu:
        allocatable["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def queue(
    name: str,
    parent: str | None = None,
    resources: dict[str, Any] | None = None,
    priority: int | None = None,
    created: str | None = None,
) -> Manifest:
    spec: dict[str, Any] = {"resources": UNLIMITED_RESOURCES if resources is None else resources}
    if parent is not None:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    metadata: dict[str, Any] = {"name": name}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": metadata, "spec": spec}


def priority_class(name: str, value: int, global_default: bool = False) -> Manifest:
    manifest: Manifest = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if global_default:
        manifest["globalDefault"] = True
    return manifest


def pod_group(
    name: str,
    queue_name: str | None,
    namespace: str = "team",
    min_member: int = 1,
    priority_class_name: str | None = None,
    preemptibility: str | None = None,
) -> Manifest:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue_name is not None:
        spec["queue"] = queue_name
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if preemptibility is not None:
        spec["preemptibility"] = preemptibility
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod(
    name: str,
    queue_name: str | None = None,
    namespace: str = "team",
    gpu: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    group: str | None = None,
    scheduler: str = "kai-scheduler",
    node_name: str | None = None,
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class_name: str | None = None,
    gates: tuple[str, ...] = (),
) -> Manifest:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    pod_labels = dict(labels or {})
    if queue_name is not None:
        pod_labels["kai.scheduler/queue"] = queue_name
    pod_annotations = dict(annotations or {})
    if group is not None:
        pod_annotations["pod-group-name"] = group
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": pod_labels, "annotations": pod_annotations},
        "spec": spec,
    }
    if phase is not None:
        manifest["status"] = {"phase": phase}
    return manifest


def workload(name: str, queue: str, min_count: int, template: str = "workers") -> Manifest:
    """A Kubernetes Workload API Workload (scheduling.k8s.io/v1beta1) of one gang template, its
    queue named by KAI's label."""
    policy = {"name": template, "schedulingPolicy": {"gang": {"minCount": min_count}}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue}},
        "spec": {"podGroupTemplates": [policy]},
    }


def workload_gang(name: str, workload_name: str, min_count: int, template: str = "workers") -> Manifest:
    """A Workload API PodGroup (scheduling.k8s.io/v1beta1) made from ``workload_name``'s template."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "workloadRef": {"workloadName": workload_name, "templateName": template},
            "schedulingPolicy": {"gang": {"minCount": min_count}},
        },
    }


def as_list(items: list[Manifest]) -> Manifest:
    """The ``kind: List`` wrapper that ``kubectl get ... -o yaml`` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def write(path: Path, objects: list[Manifest], form: str = "stream") -> Path:
    """``stream``: multi-document YAML; ``list``: one YAML List; ``json``: one JSON List."""
    if form == "stream":
        path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    elif form == "list":
        path.write_text(yaml.safe_dump(as_list(objects), sort_keys=False))
    elif form == "json":
        path.write_text(json.dumps(as_list(objects), indent=1))
    else:
        raise ValueError(form)
    return path
