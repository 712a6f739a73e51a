"""Writing a ResourceClaim's allocation before its pod is bound (KAI's binder DRA plugin).

The scheduler chose the devices; the binder records them in the claim's
``status.allocation`` (unless the claim is already allocated, e.g. shared by a running
pod) and adds the pod to ``status.reservedFor``, then binds. The kubelet prepares exactly
those devices. Writes go through ``resourceclaims/status`` with the claim's
resourceVersion and are retried on a conflict. A rolled-back attempt takes the pod out of
``reservedFor`` again and clears an allocation that only it had made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import RESOURCE_CLAIMS
from kai_ray.model import ClaimAllocation

CONFLICT_RETRIES = 5


def allocation_json(allocation: ClaimAllocation) -> JSON:
    """A claim's ``status.allocation`` in resource.k8s.io/v1 form (devices, and the node selector
    the allocator writes for node-local devices)."""
    out: JSON = {
        "devices": {
            "results": [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                for r in allocation.results
            ]
        }
    }
    if allocation.node is not None:
        field = {"key": "metadata.name", "operator": "In", "values": [allocation.node]}
        out["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
    return out


def allocation_config(claim: JSON, class_configs: Mapping[str, Sequence[JSON]]) -> list[JSON]:
    """``status.allocation.devices.config`` as Kubernetes' allocator fills it: each request's device
    class config (source FromClass, limited to that request), then the claim's own
    ``spec.devices.config`` (source FromClaim). The DRA driver reads its opaque parameters from
    here when the kubelet prepares the devices, so leaving it out would silently drop them."""
    devices = (claim.get("spec") or {}).get("devices") or {}
    out: list[JSON] = []
    for request in devices.get("requests") or []:
        options = [request.get("exactly") or request, *(request.get("firstAvailable") or [])]
        for option in options:
            name = request["name"] if option is options[0] else f"{request['name']}/{option.get('name')}"
            for config in class_configs.get(str(option.get("deviceClassName") or ""), ()):
                out.append({"source": "FromClass", "requests": [name], **_device_configuration(config)})
    for config in devices.get("config") or []:
        entry: JSON = {"source": "FromClaim", **_device_configuration(config)}
        if config.get("requests"):
            entry["requests"] = list(config["requests"])
        out.append(entry)
    return out


def _device_configuration(config: JSON) -> JSON:
    return {key: value for key, value in config.items() if key not in ("requests", "source")}


@dataclass(frozen=True, slots=True)
class ClaimBind:
    claim: str  # the ResourceClaim's name (in the pod's namespace)
    allocation: JSON | None  # status.allocation to write; None when the claim is already allocated
    class_configs: Mapping[str, Sequence[JSON]] = field(default_factory=dict)  # DeviceClass -> spec.config


@dataclass(frozen=True, slots=True)
class ClaimChange:
    claim: str
    allocated: bool  # this attempt wrote the allocation


class ClaimWriter:
    def __init__(self, api: KubeApi) -> None:
        self.api = api

    async def reserve(self, pod: JSON, claims: tuple[ClaimBind, ...], done: list[ClaimChange]) -> None:
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        consumer = {"resource": "pods", "name": meta["name"], "uid": meta.get("uid") or ""}
        for bind in claims:

            def change(claim: JSON, bind: ClaimBind = bind) -> bool:
                status = claim.setdefault("status", {})
                wrote = False
                if not status.get("allocation"):
                    if bind.allocation is None:
                        raise KubeError(409, f"claim {bind.claim} lost its allocation before the bind")
                    allocation = dict(bind.allocation)
                    config = allocation_config(claim, bind.class_configs)
                    if config:
                        allocation["devices"] = {**allocation["devices"], "config": config}
                    status["allocation"] = allocation
                    wrote = True
                reserved = status.setdefault("reservedFor", [])
                if not any(r.get("uid") == consumer["uid"] and r.get("name") == consumer["name"] for r in reserved):
                    reserved.append(dict(consumer))
                return wrote

            wrote = await self._update(namespace, bind.claim, change)
            done.append(ClaimChange(bind.claim, wrote))

    async def release(self, namespace: str, pod: str, uid: str, done: list[ClaimChange]) -> None:
        for item in reversed(done):

            def change(claim: JSON, item: ClaimChange = item) -> bool:
                status = claim.setdefault("status", {})
                status["reservedFor"] = [
                    r
                    for r in status.get("reservedFor") or []
                    if not (r.get("name") == pod and r.get("uid", uid) == uid)
                ]
                if item.allocated and not status["reservedFor"]:
                    status.pop("allocation", None)
                return True

            try:
                await self._update(namespace, item.claim, change)
            except KubeError as exc:
                if exc.status != 404:
                    raise

    async def _update(self, namespace: str, name: str, change: Callable[[JSON], bool]) -> bool:
        path = RESOURCE_CLAIMS.item(name, namespace)
        for attempt in range(CONFLICT_RETRIES):
            claim = (await self.api.request("GET", path)).body
            result = change(claim)
            try:
                await self.api.request("PUT", RESOURCE_CLAIMS.item(name, namespace, "status"), body=claim)
                return bool(result)
            except KubeError as exc:
                if exc.status != 409 or attempt == CONFLICT_RETRIES - 1:
                    raise
        return False
