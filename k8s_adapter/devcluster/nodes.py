"""Synthetic kwok-style nodes for the dev cluster: 8-GPU, 4-GPU and CPU-only pools."""

from __future__ import annotations

from typing import Any

POOLS = (  # (share of nodes, gpus, gpu memory MiB, cpu cores, memory GiB, label)
    (0.5, 8, 81920, 96, 1024, "gpu-8x80g"),
    (0.3, 4, 49152, 48, 512, "gpu-4x48g"),
    (0.2, 0, 0, 32, 128, "cpu"),
)


def kwok_node(name: str, gpus: int, gpu_memory: int, cpu: int, memory_gib: int, pool: str, zone: str,
              rack: str, taint: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok", "node-role.kubernetes.io/agent": "", "topology.kubernetes.io/zone": zone,
              "kai-ray.dev/rack": rack, "kai-ray.dev/pool": pool}
    if gpus:
        labels["nvidia.com/gpu.memory"] = str(gpu_memory)
        labels["nvidia.com/gpu.count"] = str(gpus)
    resources = {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources), "phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake"}},
    }
    if taint:
        node["spec"]["taints"] = [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    return node


def synthetic_nodes(count: int, taint: bool = False, prefix: str = "kwok-node") -> list[dict[str, Any]]:
    """``count`` nodes split over the pools, spread over 3 zones and racks of 16."""
    nodes = []
    bounds, total = [], 0.0
    for share, *_ in POOLS:
        total += share
        bounds.append(total)
    for i in range(count):
        position = (i + 0.5) / max(count, 1)
        pool = next(p for p, bound in zip(POOLS, bounds, strict=True) if position <= bound + 1e-9)
        _, gpus, gpu_memory, cpu, memory, label = pool
        nodes.append(kwok_node(f"{prefix}-{i:05d}", gpus, gpu_memory, cpu, memory, label,
                               f"zone-{chr(ord('a') + i % 3)}", f"rack-{i // 16:03d}", taint))
    return nodes
