"""``resource.k8s.io/v1`` manifests for DRA tests: GPU slices, classes, claims, templates."""

from __future__ import annotations

from typing import Any

from tests import manifests as m

GPU_DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
GIB = 2**30


def gpu_class(name: str = GPU_CLASS) -> m.Manifest:
    return device_class(name, f"device.driver == '{GPU_DRIVER}'")


def device_class(name: str, *expressions: str) -> m.Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def gpu_slice(node: str, count: int = 8, memory_gib: int = 80, product: str = "NVIDIA H100") -> m.Manifest:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"index": {"int": i}, "productName": {"string": product}},
            "capacity": {"memory": {"value": f"{memory_gib}Gi"}},
        }
        for i in range(count)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{GPU_DRIVER}"},
        "spec": {"driver": GPU_DRIVER, "nodeName": node, "pool": {"name": node}, "devices": devices},
    }


def request(name: str = "gpu", count: int = 1, device_class_name: str = GPU_CLASS, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    *requests: dict[str, Any],
    namespace: str = "team",
    labels: dict[str, str] | None = None,
    allocated: tuple[str, list[str]] | None = None,  # (node, device names) of an existing allocation
    reserved_for: list[str] = (),  # type: ignore[assignment]
) -> m.Manifest:
    manifest: m.Manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        # KAI admits a claim several pods may share (one not made from a template) only for
        # pods of the queue its label names: the tests' queue is "q".
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kai.scheduler/queue": "q"} if labels is None else labels,
        },
        "spec": {"devices": {"requests": list(requests) or [request()]}},
    }
    status: dict[str, Any] = {}
    if allocated is not None:
        node, devices = allocated
        status["allocation"] = {
            "devices": {
                "results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": node, "device": d} for d in devices]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            },
        }
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": p} for p in reserved_for]
    if status:
        manifest["status"] = status
    return manifest


def template(name: str, *requests: dict[str, Any], namespace: str = "team") -> m.Manifest:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": list(requests) or [request()]}}},
    }


def with_claims(
    pod: m.Manifest, claims: dict[str, str] | None = None, templates: dict[str, str] | None = None
) -> m.Manifest:
    """``pod`` with spec.resourceClaims: pod-level name -> claim name, or -> template name."""
    entries = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    entries += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    pod["spec"]["resourceClaims"] = entries
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": e["name"]} for e in entries]
    return pod
