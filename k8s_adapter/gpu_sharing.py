"""Reservation pods for shared GPUs, as KAI's binder keeps them.

A fraction (``gpu-fraction`` / ``gpu-memory``) lands on a *GPU group*: one physical device
that several pods share. The device plugin knows nothing of fractions, so the first time a
group is used on a node a *reservation pod* in the reservation namespace asks the kubelet
for that whole GPU (``nvidia.com/gpu: 1``, placed directly with ``spec.nodeName``). The
kubelet and every other scheduler then see the device as taken. The reservation pod's
image finds out which physical device it got and writes its index in the annotation
``run.ai/reserve_for_gpu_index``; that index is what the fractional pods are told.

The reservation pod's name is derived from (node, group), so two binders or two retries
that race for one group meet on one object (409 AlreadyExists) instead of reserving two
devices. A reservation pod lives exactly as long as some pending or running pod carries
its group label; ``sync_group`` deletes one nobody uses any more (and, as KAI does, a
running fractional pod whose reservation is gone, since nothing holds its device).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import PODS
from kai_ray import labels as L
from kai_ray.model import GPU_RESOURCE

log = logging.getLogger(__name__)

GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
POD_NAME_PREFIX = "gpu-reservation"
CONTAINER_NAME = "resource-reservation"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


@dataclass(frozen=True, slots=True)
class ReservationSettings:
    """How reservation pods are made (KAI's binder flags of the same meaning)."""

    namespace: str = L.RESERVATION_NAMESPACE
    image: str = "ghcr.io/nvidia/kai-scheduler/resource-reservation:v0.9.3"
    service_account: str = L.RESERVATION_APP
    runtime_class: str = "nvidia"  # empty: no runtimeClassName
    timeout: float = 40.0  # seconds to wait for the reservation pod to report its GPU index
    poll: float = 0.1


class ReservationError(Exception):
    """A GPU could not be reserved for a group; the bind attempt is rolled back."""


def reservation_pod_name(node: str, group: str) -> str:
    """Deterministic per (node, group): concurrent creators collide on one object."""
    digest = hashlib.sha256(f"{node}/{group}".encode()).digest()
    return f"{POD_NAME_PREFIX}-{digest[:8].hex()}"


def gpu_groups_of(pod: JSON) -> list[str]:
    """The shared GPUs a pod's labels tie it to (one label per group, KAI's two spellings)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    groups = [str(labels[L.GPU_GROUP_LABEL])] if labels.get(L.GPU_GROUP_LABEL) else []
    prefix = L.GPU_GROUP_LABEL + "/"
    groups += [str(v) for k, v in labels.items() if k.startswith(prefix) and v]
    return list(dict.fromkeys(groups))


def group_label(group: str, multi: bool) -> tuple[str, str]:
    """The label a sharer carries: ``runai-gpu-group=g``, or ``runai-gpu-group/g=g`` for a pod
    that takes portions of several devices."""
    return (f"{L.GPU_GROUP_LABEL}/{group}", group) if multi else (L.GPU_GROUP_LABEL, group)


class ReservationService:
    def __init__(self, api: KubeApi, settings: ReservationSettings | None = None) -> None:
        self.api = api
        self.settings = settings or ReservationSettings()
        self._locks: dict[str, asyncio.Lock] = {}
        self.in_flight: Counter[str] = Counter()  # groups with a bind under way: never cleaned up
        self.created = self.deleted = 0

    def _lock(self, group: str) -> asyncio.Lock:
        return self._locks.setdefault(group, asyncio.Lock())

    # ------------------------------------------------------------------ reserve
    async def reserve(self, pod: JSON, node: str, group: str, multi: bool) -> str:
        """The GPU index of ``group`` on ``node`` (creating its reservation pod if it has none),
        then the pod's group label. Raises ReservationError."""
        async with self._lock(group):
            index = await self._index_of(group)
            if index is None:
                index = await self._create_and_wait(pod, node, group)
            key, value = group_label(group, multi)
            meta = pod.get("metadata") or {}
            try:
                await self.api.request(
                    "PATCH",
                    PODS.item(meta["name"], meta.get("namespace") or "default"),
                    body={"metadata": {"labels": {key: value}}},
                    content_type="application/merge-patch+json",
                )
            except KubeError as exc:
                await self._sync_locked(group)
                raise ReservationError(f"labelling the pod with GPU group {group} failed: {exc}") from exc
            return index

    async def _index_of(self, group: str) -> str | None:
        found = await self._list({"labelSelector": f"{L.GPU_GROUP_LABEL}={group}"}, self.settings.namespace)
        if not found:
            return None
        index = ((found[0].get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX_ANNOTATION)
        if not index:
            # Another bind created it a moment ago and is still waiting for the index: wait too.
            return await self._wait_for_index(str(found[0]["metadata"]["name"]))
        return str(index)

    async def _create_and_wait(self, pod: JSON, node: str, group: str) -> str:
        name = reservation_pod_name(node, group)
        try:
            await self.api.request(
                "POST", PODS.collection(self.settings.namespace), body=self._manifest(pod, node, group)
            )
            self.created += 1
        except KubeError as exc:
            if exc.status != 409:  # 409: the same (node, group) is being reserved elsewhere; share it
                raise ReservationError(f"creating reservation pod {name} on {node} failed: {exc}") from exc
        try:
            return await self._wait_for_index(name)
        except ReservationError:
            await self._delete(name)
            raise

    async def _wait_for_index(self, name: str) -> str:
        path = PODS.item(name, self.settings.namespace)
        deadline = asyncio.get_running_loop().time() + self.settings.timeout
        while True:
            try:
                found = (await self.api.request("GET", path)).body
            except KubeError as exc:
                if exc.status == 404:
                    raise ReservationError(f"reservation pod {name} disappeared") from exc
                found = {}
            index = ((found.get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX_ANNOTATION)
            if index:
                return str(index)
            if (found.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
                raise ReservationError(f"reservation pod {name} ended before it reported its GPU")
            if asyncio.get_running_loop().time() >= deadline:
                raise ReservationError(
                    f"reservation pod {name} reported no GPU index within {self.settings.timeout:g}s"
                )
            await asyncio.sleep(self.settings.poll)

    def _manifest(self, pod: JSON, node: str, group: str) -> JSON:
        gpu = {GPU_RESOURCE: "1"}
        spec: dict[str, Any] = {
            "nodeName": node,
            "tolerations": list((pod.get("spec") or {}).get("tolerations") or []),
            "serviceAccountName": self.settings.service_account,
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": self.settings.image,
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {"limits": dict(gpu), "requests": dict(gpu)},
                    "env": [
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    ],
                }
            ],
        }
        if self.settings.runtime_class:
            spec["runtimeClassName"] = self.settings.runtime_class
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": reservation_pod_name(node, group),
                "namespace": self.settings.namespace,
                "labels": {L.APP_LABEL: L.RESERVATION_APP, L.GPU_GROUP_LABEL: group},
                "annotations": {KARPENTER_DO_NOT_DISRUPT: "true"},
            },
            "spec": spec,
        }

    # ------------------------------------------------------------------ clean-up
    async def sync_group(self, group: str) -> None:
        async with self._lock(group):
            await self._sync_locked(group)

    async def _sync_locked(self, group: str) -> None:
        """Delete the group's reservation pod when no pending or running pod uses it; delete a
        running sharer whose reservation pod is gone (nothing holds its device any more)."""
        pods = await self._list({"labelSelector": f"{L.GPU_GROUP_LABEL}={group}"})
        pods += await self._list({"labelSelector": f"{L.GPU_GROUP_LABEL}/{group}={group}"})
        reservation = [p for p in pods if (p.get("metadata") or {}).get("namespace") == self.settings.namespace]
        sharers = [
            p
            for p in pods
            if (p.get("metadata") or {}).get("namespace") != self.settings.namespace
            and (p.get("status") or {}).get("phase") in ("Pending", "Running", None)
        ]
        if sharers and not reservation:
            for sharer in sharers:
                if (sharer.get("status") or {}).get("phase") == "Running":
                    meta = sharer["metadata"]
                    log.warning(
                        "pod %s/%s shares GPU group %s that has no reservation pod; deleting it",
                        meta.get("namespace"),
                        meta["name"],
                        group,
                    )
                    await self._delete_pod(meta["name"], meta.get("namespace") or "default")
        if reservation and not sharers and not self.in_flight[group]:
            await self._delete(str(reservation[0]["metadata"]["name"]))

    async def sync_node(self, node: str) -> None:
        """Sync every group that has a reservation pod or a sharer on ``node``."""
        query = {"labelSelector": L.GPU_GROUP_LABEL, "fieldSelector": f"spec.nodeName={node}"}
        await self.sync_groups(g for pod in await self._list(query) for g in gpu_groups_of(pod))

    async def sync_all(self) -> None:
        found = await self._list({"labelSelector": L.GPU_GROUP_LABEL})
        await self.sync_groups(g for pod in found for g in gpu_groups_of(pod))

    async def sync_groups(self, groups: Iterable[str]) -> None:
        for group in sorted(set(groups)):
            await self.sync_group(group)

    async def _delete(self, name: str) -> None:
        if await self._delete_pod(name, self.settings.namespace):
            self.deleted += 1

    async def _delete_pod(self, name: str, namespace: str) -> bool:
        try:
            await self.api.request("DELETE", PODS.item(name, namespace), body={"gracePeriodSeconds": 0})
            return True
        except KubeError as exc:
            if exc.status != 404:
                log.warning("deleting pod %s/%s failed: %s", namespace, name, exc)
            return False

    async def _list(self, query: dict[str, str], namespace: str | None = None) -> list[JSON]:
        reply = await self.api.request("GET", PODS.collection(namespace), query)
        return list(reply.body.get("items") or [])

    # ------------------------------------------------------------------ rollback
    async def forget_groups(self, namespace: str, name: str) -> None:
        """Remove every GPU-group label from a pod whose bind is rolled back."""
        path = PODS.item(name, namespace)
        try:
            pod = (await self.api.request("GET", path)).body
            labels = (pod.get("metadata") or {}).get("labels") or {}
            keys = [k for k in labels if k == L.GPU_GROUP_LABEL or k.startswith(L.GPU_GROUP_LABEL + "/")]
            if keys:
                patch = [{"op": "remove", "path": "/metadata/labels/" + _pointer(k)} for k in keys]
                await self.api.request("PATCH", path, body=patch, content_type="application/json-patch+json")
        except KubeError as exc:
            if exc.status != 404:
                raise


def _pointer(key: str) -> str:
    """A label key as one JSON-pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")
