"""What a pod's ResourceClaims ask of a node: devices to allocate, or the node they are on.

An unallocated claim becomes a ``ClaimSpec``: its requests with the device class's selectors
folded in, so a shard can test its devices without knowing the classes. An allocated claim
(shared with a running pod, or allocated earlier) pins the pod to the claim's node instead,
and asks for no new device: a claim used by several pods is allocated, and counted, once.
Specs carry no claim names of their own making, so identical pods (claims from one template)
share one ``TaskShape`` and every filter computed for one serves all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_ray.model import ALL_DEVICES, DeviceClass, DeviceRequest, Pod, ResourceClaim, SelectorRequirement


@dataclass(frozen=True, slots=True)
class RequestSpec:
    name: str
    device_class: str
    selectors: tuple[str, ...]  # the class's, then the request's
    mode: str
    count: int
    alternatives: tuple[RequestSpec, ...] = ()  # firstAvailable

    def describe(self) -> str:
        if self.alternatives:
            return " or ".join(a.describe() for a in self.alternatives)
        return f"all {self.device_class} devices" if self.mode == ALL_DEVICES else f"{self.count} × {self.device_class}"


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    name: str  # the pod's name for the claim (spec.resourceClaims[].name)
    requests: tuple[RequestSpec, ...]


@dataclass(frozen=True, slots=True)
class ClaimDemand:
    specs: tuple[ClaimSpec, ...] = ()  # claims this pod allocates when placed
    keys: tuple[str, ...] = ()  # their claim keys, in the same order
    joins: tuple[str, ...] = ()  # allocated claims it only joins
    pins: tuple[str, ...] = ()  # the node those are on (at most one distinct)
    gpus: int = 0  # GPUs the claims it allocates count toward its queue
    problem: str | None = None  # why it cannot be placed anywhere

    def affinity(self) -> tuple[SelectorRequirement, ...]:
        """The pin as a node-affinity term (``metadata.name In [node]``)."""
        if not self.pins:
            return ()
        return (SelectorRequirement("metadata.name", "In", (self.pins[0],), field=True),)


def claim_key(pod: Pod, name: str) -> str:
    return f"{pod.namespace}/{name}"


def claim_demand(
    pod: Pod,
    claims: Mapping[str, ResourceClaim],
    classes: Mapping[str, DeviceClass],
    allocated: Mapping[str, tuple[bool, str | None]] | None = None,
) -> ClaimDemand:
    """``allocated`` overrides the claims' statuses: claim key -> (allocated, node), a session's
    own allocations and virtual deallocations."""
    specs: list[ClaimSpec] = []
    keys: list[str] = []
    joins: list[str] = []
    pins: set[str] = set()
    gpus = 0
    for pod_claim in pod.resource_claims:
        if pod_claim.claim is None:
            where = f"ResourceClaimTemplate {pod_claim.template}" if pod_claim.template else "a claim name"
            return ClaimDemand(problem=f"waiting for ResourceClaim {pod_claim.name} to be created from {where}")
        key = claim_key(pod, pod_claim.claim)
        claim = claims.get(key)
        if claim is None:
            return ClaimDemand(problem=f"ResourceClaim {pod_claim.claim} does not exist")
        if claim.owner_pod is not None and claim.owner_pod != pod.name:
            return ClaimDemand(problem=f"ResourceClaim {claim.name} was made for pod {claim.owner_pod}")
        if allocated is not None and key in allocated:
            is_allocated, node = allocated[key]
        else:
            is_allocated = claim.allocation is not None
            node = claim.allocation.node if claim.allocation is not None else None
        if is_allocated:
            joins.append(key)
            if node is not None:
                pins.add(node)
            continue
        requests = []
        for request in claim.requests:
            spec, missing = _request_spec(request, classes)
            if spec is None:
                return ClaimDemand(problem=f"ResourceClaim {claim.name}: DeviceClass {missing} does not exist")
            requests.append(spec)
        specs.append(ClaimSpec(pod_claim.name, tuple(requests)))
        keys.append(key)
        gpus += claim.gpus
    if len(pins) > 1:
        return ClaimDemand(problem=f"its claims are allocated on different nodes ({', '.join(sorted(pins))})")
    return ClaimDemand(tuple(specs), tuple(keys), tuple(joins), tuple(sorted(pins)), gpus)


def _request_spec(request: DeviceRequest, classes: Mapping[str, DeviceClass]) -> tuple[RequestSpec | None, str]:
    if request.alternatives:
        options = []
        for option in request.alternatives:
            spec, missing = _request_spec(option, classes)
            if spec is None:
                return None, missing
            options.append(spec)
        return RequestSpec(request.name, options[0].device_class, (), options[0].mode, 0, tuple(options)), ""
    device_class = classes.get(request.device_class)
    if device_class is None:
        return None, request.device_class
    selectors = device_class.selectors + request.selectors
    return RequestSpec(request.name, request.device_class, selectors, request.mode, request.count), ""
