"""``resource.k8s.io`` objects into DRA records: ResourceSlice, DeviceClass, ResourceClaim, and a
pod's ``spec.resourceClaims``.

The field shapes of ``v1`` (Kubernetes 1.34) are read, and those of ``v1beta1`` (devices under
``basic``, request fields directly on the request) and ``v1beta2`` (as ``v1``), so snapshots of
older clusters load too. Malformed fields are one-line InputErrors naming the object and path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kai_ray.io.fields import ObjectReader
from kai_ray.model import (
    ALL_DEVICES,
    EXACT_COUNT,
    AttrValue,
    ClaimAllocation,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
)
from kai_ray.quantity import QuantityError, plain


def parse_resource_slice(reader: ObjectReader) -> ResourceSlice:
    spec = reader.mapping("spec", False)
    driver = _text(reader, "spec.driver", spec.get("driver"), False)
    raw_pool = spec.get("pool")
    pool: Mapping[str, Any] = raw_pool if isinstance(raw_pool, Mapping) else {}
    pool_name = str(pool.get("name") or reader.name)
    node = spec.get("nodeName") or None
    devices = []
    for i, raw in enumerate(reader.sequence("spec.devices", False)):
        where = f"spec.devices[{i}]"
        if not isinstance(raw, Mapping) or not raw.get("name"):
            raise reader.fail(where, "a device needs a name", False)
        basic = raw.get("basic")
        body: Mapping[str, Any] = basic if isinstance(basic, Mapping) else raw  # v1beta1 nests under basic
        devices.append(
            Device(
                driver,
                pool_name,
                str(raw["name"]),
                _attributes(reader, where, driver, body.get("attributes") or {}),
                _capacity(reader, where, driver, body.get("capacity") or {}),
            )
        )
    return ResourceSlice(reader.name, driver, pool_name, str(node) if node else None, tuple(devices))


def parse_device_class(reader: ObjectReader) -> DeviceClass:
    selectors = _selectors(reader, "spec.selectors", reader.sequence("spec.selectors", False), False)
    extended = reader.get("spec.extendedResourceName")
    config = reader.sequence("spec.config", False)
    return DeviceClass(
        reader.name, selectors, str(extended) if extended else None, json.dumps(config, sort_keys=True, default=str)
    )


def parse_resource_claim(reader: ObjectReader) -> ResourceClaim:
    requests = tuple(
        _request(reader, f"spec.devices.requests[{i}]", raw)
        for i, raw in enumerate(reader.sequence("spec.devices.requests"))
    )
    allocation = None
    raw_allocation = reader.get("status.allocation")
    if isinstance(raw_allocation, Mapping):
        allocation = _allocation(reader, raw_allocation)
    reserved = tuple(
        str(r.get("name"))
        for r in reader.sequence("status.reservedFor")
        if isinstance(r, Mapping) and r.get("resource", "pods") == "pods" and r.get("name")
    )
    owner = next(
        (
            str(ref.get("name"))
            for ref in reader.sequence("metadata.ownerReferences")
            if isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("name")
        ),
        None,
    )
    labels = tuple(sorted(reader.string_map("metadata.labels").items()))
    return ResourceClaim(
        reader.namespace,
        reader.name,
        str(reader.meta.get("uid") or ""),
        requests,
        allocation,
        reserved,
        labels,
        owner,
        _unsupported_fields(reader),
    )


# Parts of a claim's spec that change which devices are acceptable but that the allocator does not
# evaluate yet. Allocating while ignoring them could hand out devices the user ruled out, so a claim
# that uses one waits with a reason instead (an allocation made by someone else is still honoured).
_UNSUPPORTED_SPEC = ("constraints",)
_UNSUPPORTED_REQUEST = ("adminAccess", "capacity")


def _unsupported_fields(reader: ObjectReader) -> tuple[str, ...]:
    devices = reader.get("spec.devices")
    if not isinstance(devices, Mapping):
        return ()
    found = [f"spec.devices.{key}" for key in _UNSUPPORTED_SPEC if devices.get(key)]
    for i, raw in enumerate(devices.get("requests") or []):
        if not isinstance(raw, Mapping):
            continue
        bodies = [raw, raw.get("exactly") or {}, *(raw.get("firstAvailable") or [])]
        for key in _UNSUPPORTED_REQUEST:
            if any(isinstance(body, Mapping) and body.get(key) for body in bodies):
                found.append(f"spec.devices.requests[{i}].{key}")
    return tuple(found)


def parse_claim_template(reader: ObjectReader) -> ResourceClaim:
    """A ResourceClaimTemplate as the claim it stamps out (its ``spec.spec``)."""
    inner = reader.mapping("spec.spec")
    claim = parse_resource_claim(ObjectReader({"kind": reader.kind, "metadata": reader.meta, "spec": inner}, 0))
    return ResourceClaim(claim.namespace, claim.name, requests=claim.requests, unsupported=claim.unsupported)


def claim_from_template(template: ResourceClaim, pod: str, pod_claim: str, uid: str = "") -> ResourceClaim:
    """The claim Kubernetes' resource-claim controller makes from a template for one pod."""
    return ResourceClaim(
        template.namespace,
        f"{pod}-{pod_claim}",
        uid,
        template.requests,
        owner_pod=pod,
        unsupported=template.unsupported,
    )


def parse_pod_claims(reader: ObjectReader) -> tuple[PodClaim, ...]:
    """``spec.resourceClaims`` with the names Kubernetes gave the claims made from templates."""
    generated = {
        str(s.get("name")): str(s["resourceClaimName"])
        for s in reader.sequence("status.resourceClaimStatuses")
        if isinstance(s, Mapping) and s.get("resourceClaimName")
    }
    out = []
    for i, raw in enumerate(reader.sequence("spec.resourceClaims")):
        if not isinstance(raw, Mapping) or not raw.get("name"):
            raise reader.fail(f"spec.resourceClaims[{i}].name", "missing")
        name = str(raw["name"])
        if raw.get("resourceClaimName"):
            out.append(PodClaim(name, str(raw["resourceClaimName"])))
        elif raw.get("resourceClaimTemplateName"):
            out.append(PodClaim(name, generated.get(name), str(raw["resourceClaimTemplateName"])))
        else:
            raise reader.fail(f"spec.resourceClaims[{i}]", "needs resourceClaimName or resourceClaimTemplateName")
    return tuple(out)


def _request(reader: ObjectReader, where: str, raw: Any) -> DeviceRequest:
    if not isinstance(raw, Mapping) or not raw.get("name"):
        raise reader.fail(f"{where}.name", "missing")
    name = str(raw["name"])
    first = raw.get("firstAvailable")
    if first:
        if not isinstance(first, list):
            raise reader.fail(f"{where}.firstAvailable", "must be a list")
        options = tuple(
            _exact(reader, f"{where}.firstAvailable[{j}]", f"{name}/{sub.get('name')}", sub)
            for j, sub in enumerate(first)
            if isinstance(sub, Mapping)
        )
        return DeviceRequest(name, alternatives=options)
    exactly = raw.get("exactly")
    body: Mapping[str, Any] = exactly if isinstance(exactly, Mapping) else raw  # v1beta1: on the request
    return _exact(reader, where, name, body)


def _exact(reader: ObjectReader, where: str, name: str, body: Mapping[str, Any]) -> DeviceRequest:
    device_class = _text(reader, f"{where}.deviceClassName", body.get("deviceClassName"), True)
    mode = str(body.get("allocationMode") or EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL_DEVICES):
        raise reader.fail(f"{where}.allocationMode", f"must be ExactCount or All, not {mode!r}")
    count = body.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise reader.fail(f"{where}.count", f"must be a positive integer, not {count!r}")
    selectors = _selectors(reader, f"{where}.selectors", body.get("selectors") or [], True)
    return DeviceRequest(name, device_class, selectors, mode, count if mode == EXACT_COUNT else 0)


def _allocation(reader: ObjectReader, raw: Mapping[str, Any]) -> ClaimAllocation:
    results = []
    for i, r in enumerate((raw.get("devices") or {}).get("results") or []):
        if not isinstance(r, Mapping) or not all(r.get(k) for k in ("driver", "pool", "device")):
            raise reader.fail(f"status.allocation.devices.results[{i}]", "needs driver, pool and device")
        results.append(DeviceResult(str(r.get("request") or ""), str(r["driver"]), str(r["pool"]), str(r["device"])))
    return ClaimAllocation(_selected_node(raw.get("nodeSelector")), tuple(results))


def _selected_node(selector: Any) -> str | None:
    """The node an allocation is tied to: the ``metadata.name In [node]`` field the allocator writes."""
    if not isinstance(selector, Mapping):
        return None
    for term in selector.get("nodeSelectorTerms") or []:
        for field in (term or {}).get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def _selectors(reader: ObjectReader, where: str, raw: Any, namespaced: bool) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise reader.fail(where, "must be a list", namespaced)
    out = []
    for i, item in enumerate(raw):
        expression = (item.get("cel") or {}).get("expression") if isinstance(item, Mapping) else None
        if not isinstance(expression, str) or not expression.strip():
            raise reader.fail(f"{where}[{i}].cel.expression", "missing", namespaced)
        out.append(expression)
    return tuple(out)


def _attributes(
    reader: ObjectReader, where: str, driver: str, raw: Mapping[str, Any]
) -> tuple[tuple[str, str, AttrValue], ...]:
    out: list[tuple[str, str, AttrValue]] = []
    for qualified, value in raw.items():
        domain, name = _qualified(str(qualified), driver)
        if not isinstance(value, Mapping):
            raise reader.fail(f"{where}.attributes.{qualified}", "must be a mapping", False)
        if "bool" in value:
            out.append((domain, name, bool(value["bool"])))
        elif "int" in value:
            out.append((domain, name, int(value["int"])))
        elif "string" in value:
            out.append((domain, name, str(value["string"])))
        elif "version" in value:
            out.append((domain, name, "v:" + str(value["version"])))
        else:
            raise reader.fail(f"{where}.attributes.{qualified}", "needs bool, int, string or version", False)
    return tuple(sorted(out, key=lambda a: (a[0], a[1])))


def _capacity(
    reader: ObjectReader, where: str, driver: str, raw: Mapping[str, Any]
) -> tuple[tuple[str, str, float], ...]:
    out = []
    for qualified, value in raw.items():
        domain, name = _qualified(str(qualified), driver)
        amount = value.get("value") if isinstance(value, Mapping) else value
        try:
            out.append((domain, name, plain(amount)))
        except QuantityError:
            raise reader.fail(f"{where}.capacity.{qualified}", f"bad quantity {amount!r}", False) from None
    return tuple(sorted(out, key=lambda a: (a[0], a[1])))


def _qualified(name: str, driver: str) -> tuple[str, str]:
    """An attribute or capacity name without a domain belongs to the driver's."""
    return tuple(name.split("/", 1)) if "/" in name else (driver, name)  # type: ignore[return-value]


def _text(reader: ObjectReader, where: str, value: Any, namespaced: bool) -> str:
    if not isinstance(value, str) or not value:
        raise reader.fail(where, "missing", namespaced)
    return value
