"""kubectl against the dev cluster: create -f, get (table and YAML), get -w, delete."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually

KUBECTL = shutil.which("kubectl")
pytestmark = [ON_TEST_LOOP, pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")]

MANIFESTS = """
apiVersion: v1
kind: Node
metadata:
  name: manual-node
  labels: {type: kwok, nvidia.com/gpu.memory: "81920"}
status:
  allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8", pods: "110"}
  capacity: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8", pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: team-a
spec:
  priority: 100
  resources:
    gpu: {quota: 4, limit: 8, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: train-1
spec:
  minMember: 1
  queue: team-a
---
apiVersion: v1
kind: Pod
metadata:
  name: train-1-0
  annotations: {pod-group-name: train-1}
  labels: {kai.scheduler/queue: team-a}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: busybox
    resources:
      limits: {nvidia.com/gpu: "1"}
"""


async def kubectl(kube: Kube, tmp: Path, *args: str, timeout: float = 15) -> str:
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "KUBECACHEDIR": str(tmp / "cache")}
    process = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


async def test_create_get_watch_and_delete_with_kubectl(kube: Kube, tmp_path: Path) -> None:
    manifests = tmp_path / "objects.yaml"
    manifests.write_text(MANIFESTS)
    created = await kubectl(kube, tmp_path, "create", "-f", str(manifests))
    assert created.split("\n")[:4] == [
        "node/manual-node created",
        "queue.scheduling.run.ai/team-a created",
        "podgroup.scheduling.run.ai/train-1 created",
        "pod/train-1-0 created",
    ]

    nodes = table(await kubectl(kube, tmp_path, "get", "nodes"))
    assert nodes[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[-1][:3] == ["manual-node", "Ready", "<none>"] and len(nodes) == 6
    queues = table(await kubectl(kube, tmp_path, "get", "queues"))
    assert queues[0] == ["NAME", "PRIORITY", "PARENT", "CHILDREN", "DISPLAYNAME"] and queues[1] == ["team-a", "100"]
    groups = table(await kubectl(kube, tmp_path, "get", "pg"))  # KAI's short name
    assert groups[0] == ["NAME", "AGE"] and groups[1][0] == "train-1"
    pods = table(await kubectl(kube, tmp_path, "get", "po", "-o", "wide"))
    assert pods[0][:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1][:3] == ["train-1-0", "0/1", "Pending"] and pods[1][6] == "<none>"

    as_yaml = yaml.safe_load(await kubectl(kube, tmp_path, "get", "pod", "train-1-0", "-o", "yaml"))
    assert as_yaml["spec"]["schedulerName"] == "kai-scheduler" and as_yaml["status"]["phase"] == "Pending"
    queue = yaml.safe_load(await kubectl(kube, tmp_path, "get", "queue", "team-a", "-o", "yaml"))
    assert queue["spec"]["resources"]["gpu"] == {"quota": 4, "limit": 8, "overQuotaWeight": 1}

    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache")}
    watcher = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl",
        "get",
        "pods",
        "-w",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert watcher.stdout is not None
    lines: list[str] = []
    try:
        lines.append((await asyncio.wait_for(watcher.stdout.readline(), 10)).decode())  # the header
        lines.append((await asyncio.wait_for(watcher.stdout.readline(), 10)).decode())  # the pod as listed
        uid = kube.cluster.get("", "v1", "pods", "train-1-0", "default")["metadata"]["uid"]
        response = await kube.core.create_namespaced_pod_binding(
            "train-1-0",
            "default",
            {"metadata": {"name": "train-1-0", "uid": uid}, "target": {"kind": "Node", "name": "manual-node"}},
            _preload_content=False,
        )
        assert response.status == 201
        while not any("Running" in line for line in lines):
            lines.append((await asyncio.wait_for(watcher.stdout.readline(), 10)).decode())
    finally:
        watcher.terminate()
        await watcher.wait()
    assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
    assert lines[-1].split()[:3] == ["train-1-0", "1/1", "Running"]

    changed = tmp_path / "changed.yaml"
    changed.write_text(MANIFESTS.replace("quota: 4", "quota: 6"))
    applied = await kubectl(kube, tmp_path, "apply", "-f", str(changed))
    assert "queue.scheduling.run.ai/team-a configured" in applied
    server_side = await kubectl(kube, tmp_path, "apply", "--server-side", "-f", str(changed))
    assert [line.split()[-1] for line in server_side.strip().splitlines()] == ["serverside-applied"] * 4
    assert kube.cluster.get("scheduling.run.ai", "v2", "queues", "team-a")["spec"]["resources"]["gpu"]["quota"] == 6

    deleted = await kubectl(kube, tmp_path, "delete", "pod", "train-1-0")  # waits for the simulated kubelet
    assert deleted.strip() == 'pod "train-1-0" deleted'
    assert kube.cluster.get("", "v1", "pods", "train-1-0", "default") is None
    await kubectl(kube, tmp_path, "delete", "-f", str(manifests), "--ignore-not-found")
    await eventually(lambda: kube.cluster.objects("scheduling.run.ai", "v2", "queues") == [])
    assert kube.cluster.get("", "v1", "nodes", "manual-node") is None


async def test_kubectl_creates_a_list_it_printed(kube: Kube, tmp_path: Path) -> None:
    """kubectl checks a List's items against /openapi/v2 (protobuf) before creating them."""
    manifests = tmp_path / "objects.yaml"
    manifests.write_text(MANIFESTS)
    await kubectl(kube, tmp_path, "create", "-f", str(manifests))
    listed = tmp_path / "list.json"
    listed.write_text(await kubectl(kube, tmp_path, "get", "queue/team-a", "podgroup/train-1", "-o", "json"))
    assert yaml.safe_load(listed.read_text())["kind"] == "List"
    await kubectl(kube, tmp_path, "delete", "queue/team-a", "podgroup/train-1")
    created = await kubectl(kube, tmp_path, "create", "-f", str(listed))
    assert created.split() == [
        "queue.scheduling.run.ai/team-a",
        "created",
        "podgroup.scheduling.run.ai/train-1",
        "created",
    ]
    assert kube.cluster.get("scheduling.run.ai", "v2", "queues", "team-a")["spec"]["priority"] == 100
