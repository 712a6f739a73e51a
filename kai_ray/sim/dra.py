"""DRA in the simulator: GPU nodes whose devices a DRA driver publishes, and the claims of the
jobs that ask for GPUs through ResourceClaims instead of ``nvidia.com/gpu``.

Every ``1/share``-th GPU node of the synthetic cluster (``simulate --dra-share``) advertises no
``nvidia.com/gpu``: its GPUs are devices of a ResourceSlice of driver ``gpu.nvidia.com`` (with
their index, product and memory), selected by the DeviceClass ``gpu.nvidia.com``. A DRA job's
pod names a claim made for it alone (as from a template) asking for its GPUs of that class.
The simulator plays the API server's part: it records the allocation a bind carries (the
binder's write) and deletes the claim with its pod (the claim controller's), and it checks
that no device is ever held by two claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kai_ray.model import (
    ClaimAllocation,
    Device,
    DeviceClass,
    DeviceRequest,
    DraObjects,
    Node,
    Pod,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
    ResourceVector,
)

DRIVER = "gpu.nvidia.com"
GPU_CLASS = DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))
CLAIM = "gpu"  # the pod's name for its claim


def with_dra_nodes(nodes: Sequence[Node], share: float) -> tuple[list[Node], DraObjects]:
    """Turn about ``share`` of the GPU nodes (spread evenly) into DRA nodes."""
    out: list[Node] = []
    slices: list[ResourceSlice] = []
    gpu_nodes = 0
    for node in nodes:
        if node.allocatable.gpu <= 0 or share <= 0:
            out.append(node)
            continue
        gpu_nodes += 1
        if int(gpu_nodes * share) == int((gpu_nodes - 1) * share):
            out.append(node)
            continue
        product = node.labels.get("nvidia.com/gpu.product", "")
        devices = tuple(
            Device(
                DRIVER,
                node.name,
                f"gpu-{i}",
                ((DRIVER, "index", i), (DRIVER, "productName", product)),
                ((DRIVER, "memory", float(node.gpu_memory_mib) * 2**20),),
            )
            for i in range(node.gpu_count)
        )
        slices.append(ResourceSlice(f"{node.name}-{DRIVER}", DRIVER, node.name, node.name, devices))
        alloc = node.allocatable
        out.append(replace(node, allocatable=ResourceVector.of(alloc.cpu, alloc.memory, 0, alloc.pods, alloc.scalars)))
    return out, DraObjects(tuple(slices), (GPU_CLASS,), ())


def claim_for(pod: Pod, gpus: int) -> ResourceClaim:
    return ResourceClaim(
        pod.namespace,
        f"{pod.name}-{CLAIM}",
        f"{pod.uid}-{CLAIM}",
        (DeviceRequest(CLAIM, DRIVER, (), "ExactCount", gpus),),
        owner_pod=pod.name,
    )


def claimed(pod: Pod) -> Pod:
    return replace(pod, resource_claims=(PodClaim(CLAIM, f"{pod.name}-{CLAIM}"),))


class DeviceLedger:
    """The simulator's own record of which claim holds which device (not the scheduler's)."""

    def __init__(self) -> None:
        self.holder: dict[str, str] = {}
        self.conflicts = 0
        self.allocations = 0

    def allocate(self, claim: str, allocation: ClaimAllocation) -> None:
        self.allocations += 1
        for result in allocation.results:
            if self.holder.setdefault(result.key, claim) != claim:
                self.conflicts += 1

    def release(self, claim: str) -> int:
        """Devices the claim held, now free: how many."""
        keys = [k for k, c in self.holder.items() if c == claim]
        for key in keys:
            del self.holder[key]
        return len(keys)
