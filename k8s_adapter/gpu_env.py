"""Telling a fractional pod which GPU it got and how much of it: KAI's ConfigMaps.

KAI's admission webhook gives every fractional pod, at creation, the annotation
``runai/shared-gpu-configmap: <prefix>`` and points the GPU container at two ConfigMaps that
do not exist yet: ``<prefix>-<i>`` (env ``NVIDIA_VISIBLE_DEVICES``, ``GPU_PORTION``,
``RUNAI_NUM_OF_GPUS`` taken from its keys, and a volume) and ``<prefix>-<i>-evar`` (``envFrom``),
``<i>`` being the container's index (``i<n>`` for an init container). The container cannot
start until they exist. The binder writes them just before binding:

- ``GPU_PORTION`` and ``RUNAI_NUM_OF_GPUS``: the portion of each device, two decimals;
- ``NVIDIA_VISIBLE_DEVICES``: the reserved devices' indexes, comma-separated, in the first
  map when the container reads it from there, else in the ``-evar`` map.

A pod that no webhook touched gets the annotation from the binder (a prefix derived from its
uid), so the names are known and the ConfigMaps exist all the same; such a pod reads them
by referring to ``<prefix>-0`` / ``<prefix>-0-evar`` itself. Both maps are owned by the pod,
so they go with it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import CONFIG_MAPS, PODS
from kai_ray import labels as L

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION = "GPU_PORTION"
NUM_OF_GPUS = "RUNAI_NUM_OF_GPUS"  # KAI's older name for the portion, still written
LEGACY_VISIBLE_DEVICES = "RUNAI-VISIBLE-DEVICES"
MAX_VOLUME_NAME = 63
SUFFIX = "shared-gpu"


class GpuEnvError(Exception):
    """The pod cannot be given its GPU environment (e.g. the named container does not exist)."""


@dataclass(frozen=True, slots=True)
class ContainerRef:
    index: int
    init: bool
    container: JSON

    @property
    def suffix(self) -> str:
        return f"i{self.index}" if self.init else str(self.index)


def fraction_container(pod: JSON) -> ContainerRef:
    """The container that gets the fraction: ``gpu-fraction-container-name``, else the first."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    wanted = ((pod.get("metadata") or {}).get("annotations") or {}).get(L.GPU_FRACTION_CONTAINER_ANNOTATION)
    if wanted is None:
        if not containers:
            raise GpuEnvError("the pod has no containers")
        return ContainerRef(0, False, containers[0])
    for init, listed in ((True, spec.get("initContainers") or []), (False, containers)):
        for index, container in enumerate(listed):
            if container.get("name") == wanted:
                return ContainerRef(index, init, container)
    raise GpuEnvError(f"container {wanted} named by {L.GPU_FRACTION_CONTAINER_ANNOTATION} does not exist")


def generated_prefix(pod: JSON, ref: ContainerRef) -> str:
    """KAI's naming (owner or pod name, cut to fit a volume name, then 7 characters and
    ``shared-gpu``), with the 7 characters taken from the pod's uid so a retry finds the same."""
    meta = pod.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    base = str(owners[0].get("name") if owners else meta.get("name") or "pod")
    room = MAX_VOLUME_NAME - 13 - len(SUFFIX) - len(str(ref.index)) - 1 - 5
    base = base[:room].rstrip(".-")
    tag = hashlib.sha256(str(meta.get("uid") or meta.get("name")).encode()).hexdigest()[:7]
    return f"{base}-{tag}-{SUFFIX}"


def reads_devices_from_first_map(ref: ContainerRef, first_map: str) -> bool:
    """Whether the container takes NVIDIA_VISIBLE_DEVICES from ``<prefix>-<i>`` (as the webhook
    wires it) rather than from the ``-evar`` map."""
    for env in ref.container.get("env") or []:
        key_ref = (env.get("valueFrom") or {}).get("configMapKeyRef") or {}
        if env.get("name") == VISIBLE_DEVICES and key_ref.get("name") == first_map:
            return True
    return False


class GpuEnvWriter:
    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def write(self, pod: JSON, devices: list[str], portion: str) -> list[str]:
        """Create or update the pod's two ConfigMaps; their names (for a rollback)."""
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", str(meta["name"])
        ref = fraction_container(pod)
        prefix = (meta.get("annotations") or {}).get(L.SHARED_GPU_CONFIGMAP_ANNOTATION)
        if not prefix:
            prefix = generated_prefix(pod, ref)
            await self.api.request(
                "PATCH",
                PODS.item(name, namespace),
                body={"metadata": {"annotations": {L.SHARED_GPU_CONFIGMAP_ANNOTATION: prefix}}},
                content_type="application/merge-patch+json",
            )
        first, evar = f"{prefix}-{ref.suffix}", f"{prefix}-{ref.suffix}-evar"
        visible = ",".join(devices)
        first_data = {GPU_PORTION: portion, NUM_OF_GPUS: portion}
        evar_data: dict[str, str] = {}
        if reads_devices_from_first_map(ref, first):
            first_data[VISIBLE_DEVICES] = visible
        else:
            evar_data[VISIBLE_DEVICES] = visible
        owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": str(meta.get("uid") or "")}
        for map_name, data in ((first, first_data), (evar, evar_data)):
            await self._upsert(namespace, map_name, data, owner, visible)
        return [first, evar]

    async def _upsert(self, namespace: str, name: str, data: dict[str, str], owner: JSON, visible: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
            "data": data,
        }
        try:
            await self.api.request("POST", CONFIG_MAPS.collection(namespace), body=body)
            return
        except KubeError as exc:
            if exc.status != 409:
                raise
        current = (await self.api.request("GET", CONFIG_MAPS.item(name, namespace))).body
        merged = dict(current.get("data") or {})
        if LEGACY_VISIBLE_DEVICES in merged:  # maps made for KAI's older variable name keep it current
            merged[LEGACY_VISIBLE_DEVICES] = visible
        merged.update(data)
        await self.api.request(
            "PATCH",
            CONFIG_MAPS.item(name, namespace),
            body={"metadata": {"ownerReferences": [owner]}, "data": merged},
            content_type="application/merge-patch+json",
        )

    async def remove(self, namespace: str, names: list[str]) -> None:
        for name in names:
            try:
                await self.api.request("DELETE", CONFIG_MAPS.item(name, namespace))
            except KubeError as exc:
                if exc.status != 404:
                    raise
