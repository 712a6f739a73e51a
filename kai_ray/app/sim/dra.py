"""DRA in the simulator: GPU nodes whose devices a DRA driver publishes, and the claims of the
jobs that ask for GPUs through ResourceClaims instead of ``nvidia.com/gpu``.

Every ``1/share``-th GPU node of the synthetic cluster (``simulate --dra-share``) advertises no
``nvidia.com/gpu``: its GPUs are devices of a ResourceSlice of driver ``gpu.nvidia.com`` (with
their index, product and memory), selected by the DeviceClass ``gpu.nvidia.com``. A DRA job's
pod names a claim made for it alone (as from a template) asking for its GPUs of that class.
The simulator plays the API server's part: it records the allocation a bind carries (the
binder's write) and deletes the claim with its pod (the claim controller's), and it checks
that no device is ever held by two claims. Its objects reach the scheduler as manifests
(``slice_manifest``, ``class_manifest``, ``claim_manifest``) through the adapter's cache, as
``kai-ray run --dra`` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from k8s_adapter.claims import allocation_json
from kai_ray.model import (
    AttrValue,
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
    if not slices:  # no DRA node: no driver either, so no device class that nothing publishes for
        return out, DraObjects()
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


# ---------------------------------------------------------------------- as the API server stores them
def _attribute(value: AttrValue) -> dict[str, object]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if value.startswith("v:"):
        return {"version": value[2:]}
    return {"string": value}


def _amount(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else repr(value)


def _qualified(domain: str, name: str, driver: str) -> str:
    return name if domain == driver else f"{domain}/{name}"


def slice_manifest(resource_slice: ResourceSlice) -> dict[str, Any]:
    driver = resource_slice.driver
    devices = [
        {
            "name": device.name,
            "attributes": {_qualified(d, n, driver): _attribute(v) for d, n, v in device.attributes},
            "capacity": {_qualified(d, n, driver): {"value": _amount(v)} for d, n, v in device.capacity},
        }
        for device in resource_slice.devices
    ]
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": resource_slice.pool}, "devices": devices}
    if resource_slice.node:
        spec["nodeName"] = resource_slice.node
    return {**_head("ResourceSlice", resource_slice.name), "spec": spec}


def class_manifest(device_class: DeviceClass) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selectors": [{"cel": {"expression": e}} for e in device_class.selectors],
        "config": json.loads(device_class.config_json),
    }
    if device_class.extended_resource_name:
        spec["extendedResourceName"] = device_class.extended_resource_name
    return {**_head("DeviceClass", device_class.name), "spec": spec}


def _request(request: DeviceRequest) -> dict[str, Any]:
    if request.alternatives:
        options = [{"name": a.name.rsplit("/", 1)[-1], **_exactly(a)} for a in request.alternatives]
        return {"name": request.name, "firstAvailable": options}
    return {"name": request.name, "exactly": _exactly(request)}


def _exactly(request: DeviceRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": request.device_class, "allocationMode": request.mode}
    if request.mode == "ExactCount":
        body["count"] = request.count
    if request.selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in request.selectors]
    return body


def claim_manifest(claim: ResourceClaim) -> dict[str, Any]:
    """A claim as the API server holds it: ``status.allocation`` in the binder's words
    (``k8s_adapter.claims.allocation_json``), and the pods it is reserved for."""
    manifest = _head("ResourceClaim", claim.name)
    meta = manifest["metadata"]
    meta.update(namespace=claim.namespace, uid=claim.uid, labels=dict(claim.labels))
    if claim.owner_pod:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": claim.owner_pod, "uid": ""}]
    manifest["spec"] = {"devices": {"requests": [_request(r) for r in claim.requests]}}
    status: dict[str, Any] = {}
    if claim.allocation is not None:
        status["allocation"] = allocation_json(claim.allocation)
    if claim.reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": name, "uid": ""} for name in claim.reserved_for]
    if status:
        manifest["status"] = status
    return manifest


def _head(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name}}
