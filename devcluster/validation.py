"""What kube-apiserver refuses that a scheduler must never see: pod resources and KAI's CRD schemas.

Pods (``ValidateResourceRequirements``): every quantity parses (else 400, as decoding fails
upstream) and is not negative; extended resources (a domain-prefixed name outside
kubernetes.io, such as ``nvidia.com/gpu``) are whole numbers and cannot be overcommitted, so a
request needs a limit and must equal it; other requests may not exceed their limits.

KAI's CRDs (the openAPIV3Schema of the chart's PodGroup and Queue): the fields kai-ray reads
have the types the schema gives them, and PodGroup member counts are integers of at least 0.
Messages follow the server's field errors, so clients see what a real cluster would say.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from devcluster import errors
from devcluster.registry import Causes
from kai_ray.quantity import QuantityError, parse_quantity

Obj = dict[str, Any]
QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def _is_extended(name: str) -> bool:
    prefix = name.split("/", 1)[0] if "/" in name else ""
    return bool(prefix) and prefix != "kubernetes.io" and not prefix.endswith(".kubernetes.io")


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except QuantityError:
        raise errors.bad_request(f"quantities must match the regular expression '{QUANTITY_PATTERN}'") from None


def _container_causes(path: str, resources: Obj) -> Causes:
    causes: Causes = []
    sections = {}
    for section in ("limits", "requests"):
        values = resources.get(section) or {}
        if not isinstance(values, dict):
            causes.append((f"{path}.{section}", "Invalid value: must be an object"))
            values = {}
        sections[section] = {str(k): (v, _quantity(v)) for k, v in values.items()}
    for section, values in sections.items():
        for name, (raw, amount) in values.items():
            where = f"{path}.{section}[{name}]"
            if amount < 0:
                causes.append((where, f'Invalid value: "{raw}": must be greater than or equal to 0'))
            elif _is_extended(name) and amount != amount.to_integral_value():
                causes.append((where, f'Invalid value: "{raw}": must be an integer'))
    limits = sections["limits"]
    for name, (raw, amount) in sections["requests"].items():
        where = f"{path}.requests[{name}]"
        overcommit = not _is_extended(name) and not name.startswith("hugepages-")
        if name in limits:
            limit_raw, limit = limits[name]
            if amount != limit and not overcommit:
                causes.append((where, f'Invalid value: "{raw}": must be equal to {name} limit of {limit_raw}'))
            elif amount > limit:
                causes.append(
                    (where, f'Invalid value: "{raw}": must be less than or equal to {name} limit of {limit_raw}')
                )
        elif not overcommit:
            causes.append(
                (f"{path}.limits[{name}]", "Required value: Limit must be set for non overcommitable resources")
            )
    return causes


def pod_resource_causes(pod: Obj) -> Causes:
    """Field errors of the pod's container resources (after requests were defaulted from limits)."""
    spec = pod.get("spec") or {}
    causes: Causes = []
    for section in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(section) or []):
            if isinstance(container, dict) and isinstance(container.get("resources") or {}, dict):
                causes += _container_causes(f"spec.{section}[{i}].resources", container.get("resources") or {})
    return causes


def _integer(value: Any, where: str, causes: Causes, minimum: int | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "string" if isinstance(value, str) else "boolean" if isinstance(value, bool) else type(value).__name__
        causes.append((where, f'Invalid value: "{kind}": {where} in body must be of type integer: "{kind}"'))
    elif minimum is not None and value < minimum:
        causes.append((where, f"Invalid value: {value}: {where} in body should be greater than or equal to {minimum}"))


def _typed(value: Any, where: str, causes: Causes, wanted: type | tuple[type, ...], name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, wanted):
        kind = "string" if isinstance(value, str) else type(value).__name__
        causes.append((where, f'Invalid value: "{kind}": {where} in body must be of type {name}: "{kind}"'))


def pod_group_causes(obj: Obj) -> Causes:
    spec = obj.get("spec")
    causes: Causes = []
    if not isinstance(spec, dict):
        return causes if spec is None else [("spec", 'Invalid value: "spec" in body must be of type object')]
    for field in ("minMember", "minSubGroup"):
        _integer(spec.get(field), f"spec.{field}", causes, 0)
    for field in ("queue", "priorityClassName", "preemptibility", "stalenessGracePeriod"):
        _typed(spec.get(field), f"spec.{field}", causes, str, "string")
    sub_groups = spec.get("subGroups")
    if isinstance(sub_groups, list):
        for i, sub in enumerate(sub_groups):
            if isinstance(sub, dict):
                for field in ("minMember", "minSubGroup"):
                    _integer(sub.get(field), f"spec.subGroups[{i}].{field}", causes, 0)
    elif sub_groups is not None:
        _typed(sub_groups, "spec.subGroups", causes, list, "array")
    return causes


def queue_causes(obj: Obj) -> Causes:
    spec = obj.get("spec")
    causes: Causes = []
    if not isinstance(spec, dict):
        return causes
    _integer(spec.get("priority"), "spec.priority", causes)
    _typed(spec.get("parentQueue"), "spec.parentQueue", causes, str, "string")
    resources = spec.get("resources")
    if isinstance(resources, dict):
        for name in ("gpu", "cpu", "memory"):
            block = resources.get(name)
            if isinstance(block, dict):
                for field in ("quota", "limit", "overQuotaWeight"):
                    _typed(block.get(field), f"spec.resources.{name}.{field}", causes, (int, float), "number")
    return causes
