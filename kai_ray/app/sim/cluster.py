"""Synthetic kwok-style nodes shaped like a GPU cluster's, as manifests or as model records.

Out of every ten nodes, five have 8 GPUs of 80 GiB, three have 4 GPUs of 40 GiB and two are
CPU-only, in that order, so any prefix of the list has the same mix. Nodes sit in racks of
eight and racks rotate over three zones. Labels follow what GPU feature discovery and kwok
put on real nodes (``nvidia.com/gpu.*``, ``type: kwok``, annotation ``kwok.x-k8s.io/node``);
the optional taint is kwok's ``kwok.x-k8s.io/node=fake:NoSchedule``.

One generator serves the dev cluster, the kwok load tests (as Node manifests) and the
simulator and benchmarks (as ``Node`` records, read from those same manifests by the
snapshot parser, so both views of a node always agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node
from kai_ray.model import Node

Obj = dict[str, Any]
RACK_LABEL = "kai-ray.dev/rack"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_SIZE = 8
ZONES = ("zone-a", "zone-b", "zone-c")
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class NodeShape:
    pool: str
    gpus: int
    gpu_memory_mib: int
    gpu_product: str
    cpu: int
    memory_gib: int


SHAPES = (
    NodeShape("gpu-8x80gb", 8, 81920, "NVIDIA-H100-80GB-HBM3", 128, 2048),
    NodeShape("gpu-4x40gb", 4, 40960, "NVIDIA-A100-SXM4-40GB", 64, 1024),
    NodeShape("cpu", 0, 0, "", 64, 256),
)
PATTERN = (0, 0, 0, 0, 0, 1, 1, 1, 2, 2)  # shape index for each node in a block of ten


def kwok_node(name: str, shape: NodeShape, index: int, taint: bool = False) -> Obj:
    """One Ready node of ``shape``; ``index`` places it in a rack and zone and gives it an address."""
    rack = index // RACK_SIZE
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": shape.pool,
        "type": "kwok",
        ZONE_LABEL: ZONES[rack % len(ZONES)],
        RACK_LABEL: f"rack-{rack}",
        "node-role.kubernetes.io/agent": "",
    }
    capacity = {"cpu": str(shape.cpu), "memory": f"{shape.memory_gib}Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    if shape.gpus:
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(shape.gpus),
                "nvidia.com/gpu.product": shape.gpu_product,
                "nvidia.com/gpu.memory": str(shape.gpu_memory_mib),
            }
        )
        capacity["nvidia.com/gpu"] = str(shape.gpus)
    address = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m}
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    )
    node: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(KWOK_TAINT)]} if taint else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
                "osImage": "kwok",
                "kernelVersion": "kwok",
                "containerRuntimeVersion": "kwok",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }
    return node


def synthetic_nodes(count: int, taint: bool = False, prefix: str = "kwok-node") -> list[Obj]:
    return [kwok_node(f"{prefix}-{i}", SHAPES[PATTERN[i % len(PATTERN)]], i, taint) for i in range(count)]


def model_nodes(count: int, taint: bool = False, prefix: str = "node") -> list[Node]:
    """The same nodes as ``synthetic_nodes``, as the scheduler's model sees them."""
    return [parse_node(ObjectReader(obj, i)) for i, obj in enumerate(synthetic_nodes(count, taint, prefix))]


def pool_of(node: Node) -> str:
    return node.labels.get("node.kubernetes.io/instance-type", "")
