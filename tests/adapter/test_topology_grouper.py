"""The running scheduler against the dev cluster: a Topology object and a PyTorchJob whose pods
name no PodGroup. The pod grouper sizes the gang by KAI's rule (elasticPolicy.minReplicas, the
master/worker sub-groups) and carries the job's topology annotations; the gang lands in one rack."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import DevCluster
from k8s_adapter.api import connect
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.adapter.conftest import Env, queue, until
from tests.adapter.test_end_to_end import running

RACK = "example.com/rack"
PODS = "/api/v1/namespaces/default/pods"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"


def rack_nodes() -> list[dict[str, Any]]:
    """Six 8-GPU nodes; rack r1 holds two, r2 four."""
    nodes = synthetic_nodes(6)
    for i, node in enumerate(nodes):
        node["metadata"]["labels"][RACK] = "r1" if i < 2 else "r2"
        node["status"]["allocatable"]["nvidia.com/gpu"] = node["status"]["capacity"]["nvidia.com/gpu"] = "8"
    return nodes


@pytest.fixture
async def racks(tmp_path: Path) -> AsyncIterator[Env]:
    from prometheus_client import CollectorRegistry

    cluster = DevCluster(nodes=rack_nodes(), start_delay=0.05, max_grace=0.2, bookmark_seconds=0.5)
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    api = await connect(str(kubeconfig))
    yield Env(cluster, api, kubeconfig, CollectorRegistry())
    await api.close()
    await cluster.stop()


PYTORCH_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "scope": "Namespaced",
        "names": {
            "kind": "PyTorchJob",
            "plural": "pytorchjobs",
            "singular": "pytorchjob",
            "listKind": "PyTorchJobList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def worker_pod(job: dict[str, Any], role: str, index: int) -> dict[str, Any]:
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"train-{role}-{index}",
            "labels": {
                "kai.scheduler/queue": "team",
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": str(index),
            },
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
        },
    }


async def test_a_pytorch_job_is_grouped_by_kais_rules_and_kept_in_one_rack(racks: Env) -> None:
    env = racks
    await env.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PYTORCH_CRD)
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("team"))
    topology = {"nodeLabel": RACK}
    await env.create(
        "/apis/kai.scheduler/v1alpha1/topologies",
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "racks"},
            "spec": {"levels": [topology]},
        },
    )
    job = await env.create(
        JOBS,
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {
                "name": "train",
                "annotations": {"kai.scheduler/topology": "racks", "kai.scheduler/topology-required-placement": RACK},
            },
            "spec": {
                "elasticPolicy": {"minReplicas": 3},
                "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 4}},
            },
        },
    )
    names = ["train-master-0", *(f"train-worker-{i}" for i in range(4))]
    await env.create(PODS, worker_pod(job, "master", 0))
    for i in range(4):
        await env.create(PODS, worker_pod(job, "worker", i))
    loop = env.loop()

    def bound() -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in env.cluster.objects("", "v1", "pods", "default")
            if p["spec"].get("nodeName")
        }

    def waiting_says_why() -> bool:
        pods = {p["metadata"]["name"]: p for p in env.cluster.objects("", "v1", "pods", "default")}
        messages = [
            c.get("message", "")
            for n in names
            if n not in bound()
            for c in pods[n].get("status", {}).get("conditions", [])
        ]
        return any("couldn't be satisfied" in m for m in messages)

    async with running(loop):
        await until(lambda: len(bound()) == 4 and waiting_says_why(), 20)
        await asyncio.sleep(0.3)
    [group] = env.cluster.objects("scheduling.run.ai", "v2alpha2", "podgroups", "default")
    spec = group["spec"]
    assert spec["minMember"] == 3  # elasticPolicy.minReplicas, not the 5 replicas
    assert spec["subGroups"] == [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 2}]
    assert spec["topologyConstraint"] == {"topology": "racks", "requiredTopologyLevel": RACK}
    pods = {p["metadata"]["name"]: p for p in env.cluster.objects("", "v1", "pods", "default")}
    assert {pods[n]["metadata"]["labels"]["kai.scheduler/subgroup-name"] for n in names} == {"master", "worker"}
    # The gang of 3 (12 GPUs) bin-packs into r1 (16 GPUs), the fuller rack; the elastic workers
    # join it one by one while r1 has room, and the fifth waits rather than cross into r2.
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"][RACK] for n in env.cluster.objects("", "v1", "nodes", None)}
    placed = bound()
    assert len(placed) == 4 and {nodes[n] for n in placed.values()} == {"r1"}
