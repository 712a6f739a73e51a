"""The snapshots ``bench_read`` reads, written as ``kubectl get -o yaml/json`` prints objects:
KAI's fill test (500 nodes of 8 GPUs, 4,000 one-GPU jobs in 4 queues) and 1,000 gangs of 8 on
5,000 nodes, each job a PodGroup and its pods as the API server returns them."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_ray import labels as L
from kai_ray.app.sim.cluster import KWOK_TAINT, SHAPES, kwok_node

Manifest = dict[str, Any]
NAMESPACE = "bench"
CREATED = 1_735_000_000  # creation times count up from here, one second per job

_Dumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True, slots=True)
class ReadShape:
    name: str
    nodes: int
    jobs: int
    pods_per_job: int
    queues: int = 4

    @property
    def pods(self) -> int:
        return self.jobs * self.pods_per_job

    @property
    def label(self) -> str:
        job = "one-GPU jobs" if self.pods_per_job == 1 else f"gangs x {self.pods_per_job} pods"
        return f"{self.name}: {self.nodes:,} nodes / {self.jobs:,} {job}"


FULL = (ReadShape("fill", 500, 4_000, 1), ReadShape("gangs", 5_000, 1_000, 8))
QUICK = (ReadShape("fill", 50, 400, 1), ReadShape("gangs", 500, 100, 8))


def _timestamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _queue(name: str) -> Manifest:
    unlimited = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": _timestamp(CREATED - 3600)},
        "spec": {"resources": {r: dict(unlimited) for r in ("gpu", "cpu", "memory")}},
    }


def priority_class(name: str, value: int) -> Manifest:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def _pod_group(name: str, queue: str, members: int, index: int) -> Manifest:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"pg-{index:08d}-0000-4000-8000-000000000000",
            "resourceVersion": str(1000 + index),
            "creationTimestamp": _timestamp(CREATED + index),
            "labels": {L.QUEUE_LABEL: queue},
        },
        "spec": {"minMember": members, "queue": queue, "priorityClassName": "train"},
        "status": {},
    }


def _pod(name: str, group: str, queue: str, index: int) -> Manifest:
    """A pending one-GPU pod as the API server returns it: defaults filled in, not yet scheduled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"pod-{index:08d}-0000-4000-8000-000000000000",
            "resourceVersion": str(100_000 + index),
            "creationTimestamp": _timestamp(CREATED + index),
            "labels": {"app": "bench", L.QUEUE_LABEL: queue},
            "annotations": {L.POD_GROUP_ANNOTATION: group},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1.0",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "infinity"],
                    "resources": {
                        "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [
                        {
                            "name": "kube-api-access",
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "readOnly": True,
                        }
                    ],
                }
            ],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "priorityClassName": "train",
            "restartPolicy": "Never",
            "schedulerName": L.DEFAULT_SCHEDULER_NAME,
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"key": KWOK_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        ],
                    },
                }
            ],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


def cluster_objects(shape: ReadShape, with_jobs: bool) -> list[Manifest]:
    """The snapshot's objects: 8-GPU kwok nodes (tainted), the queues, one priority class and,
    ``with_jobs``, each job's PodGroup followed by its pods, spread round-robin over the queues."""
    eight_gpu = SHAPES[0]
    objects = [kwok_node(f"gpu-node-{i:05d}", eight_gpu, i, taint=True) for i in range(shape.nodes)]
    queues = [f"team-{q}" for q in range(shape.queues)]
    objects += [_queue(q) for q in queues]
    objects.append(priority_class("train", 50))
    if with_jobs:
        for j in range(shape.jobs):
            name, queue = f"job-{j:06d}", queues[j % len(queues)]
            objects.append(_pod_group(name, queue, shape.pods_per_job, j))
            objects += [_pod(f"{name}-{p}", name, queue, j * shape.pods_per_job + p) for p in range(shape.pods_per_job)]
    return objects


def write_list(objects: Sequence[Manifest], path: Path) -> Path:
    """A ``kind: List`` of the objects, as JSON or YAML by the file's suffix."""
    document = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}
    with path.open("w", encoding="utf-8") as out:
        if path.suffix == ".json":
            json.dump(document, out, indent=4)
        else:
            yaml.dump(document, out, Dumper=_Dumper, sort_keys=False)
    return path
