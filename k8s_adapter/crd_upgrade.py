"""Upgrading the chart's CustomResourceDefinitions: what the chart's pre-upgrade hook runs.

Helm installs a chart's ``crds/`` on the first install only and never changes them again, so
KAI's chart runs a hook that applies its CRDs before every upgrade; kai-ray's does the same
with ``kai-ray apply-crds``. Each CRD is sent as a server-side apply with ``force``: the
upgrader takes ownership of every field, also from the client-side apply Helm did on install
(KAI's hook runs ``kubectl apply --server-side --force-conflicts`` for the same reason). Then
it waits until each CRD is Established, so the release's own Queues and PodGroups, created
right after the hook, find their kinds served.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from k8s_adapter.api import JSON, KubeApi, KubeError
from kai_ray.errors import InputError
from kai_ray.io.documents import iter_objects, read_documents

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FIELD_MANAGER = "kai-ray-crd-upgrader"


def read_crds(directory: str | Path) -> list[JSON]:
    """Every CustomResourceDefinition in the directory's ``*.yaml`` files, in file-name order."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"{root}: not a directory of CRD manifests")
    crds: list[JSON] = []
    for path in sorted(root.glob("*.yaml")):
        for index, obj in iter_objects(read_documents(path), str(path)):
            if obj.get("apiVersion") != "apiextensions.k8s.io/v1" or obj.get("kind") != "CustomResourceDefinition":
                raise InputError(f"{path}: document {index}: not an apiextensions.k8s.io/v1 CustomResourceDefinition")
            name = (obj.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                raise InputError(f"{path}: document {index}: metadata.name is missing")
            crds.append(dict(obj))
    if not crds:
        raise InputError(f"{root}: no CustomResourceDefinition found in its *.yaml files")
    return crds


async def apply_crds(api: KubeApi, crds: Sequence[JSON]) -> list[str]:
    """Server-side apply each CRD (forcing ownership); the names applied, in order."""
    names = []
    for crd in crds:
        name = crd["metadata"]["name"]
        await api.request(
            "PATCH",
            f"{CRDS}/{name}",
            query={"fieldManager": FIELD_MANAGER, "force": True},
            body=crd,
            content_type="application/apply-patch+yaml",
        )
        names.append(name)
    return names


async def wait_established(api: KubeApi, names: Sequence[str], timeout: float, poll: float = 0.5) -> list[str]:
    """Wait until every named CRD reports Established=True; the names still not established."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        still = []
        for name in waiting:
            crd = (await api.request("GET", f"{CRDS}/{name}")).body
            conditions = (crd.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                still.append(name)
        waiting = still
        if not waiting or time.monotonic() >= deadline:
            break
        await asyncio.sleep(poll)
    return waiting


__all__ = ["FIELD_MANAGER", "KubeError", "apply_crds", "read_crds", "wait_established"]
