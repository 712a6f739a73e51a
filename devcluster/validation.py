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

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from devcluster import errors
from devcluster.registry import Causes

Obj = dict[str, Any]
QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# The dev cluster stands alone (it imports nothing of kai-ray), so it reads quantities itself.
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_SCALE = {
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60), "n": Decimal("1e-9"), "u": Decimal("1e-6"),
    "m": Decimal("1e-3"), "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip


def _is_extended(name: str) -> bool:
    prefix = name.split("/", 1)[0] if "/" in name else ""
    return bool(prefix) and prefix != "kubernetes.io" and not prefix.endswith(".kubernetes.io")


def _quantity(value: Any) -> Decimal:
    """A quantity's exact value; a JSON number is read as written, as the API server's decoder does."""
    text = str(value).strip() if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
    match = _QUANTITY.match(text)
    if match is None:
        raise errors.bad_request(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
        raise errors.bad_request(f"quantities must match the regular expression '{QUANTITY_PATTERN}'") from None
    if not suffix:
        return amount
    return amount.scaleb(int(suffix[1:])) if suffix[0] in "eE" else amount * _SCALE[suffix]


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


def _scheduling_policy_causes(policy: Any, where: str, causes: Causes) -> None:
    """The Workload API's rule for a gang policy: exactly one of basic and gang, minCount >= 1."""
    if not isinstance(policy, dict) or ("gang" in policy) == ("basic" in policy):
        causes.append((where, "Invalid value: exactly one of basic and gang must be set"))
        return
    gang = policy.get("gang")
    if isinstance(gang, dict):
        if gang.get("minCount") is None:
            causes.append((f"{where}.gang.minCount", "Required value"))
        _integer(gang.get("minCount"), f"{where}.gang.minCount", causes, 1)


def gang_pod_group_causes(obj: Obj) -> Causes:
    causes: Causes = []
    _scheduling_policy_causes((obj.get("spec") or {}).get("schedulingPolicy"), "spec.schedulingPolicy", causes)
    return causes


def workload_causes(obj: Obj) -> Causes:
    causes: Causes = []
    templates = (obj.get("spec") or {}).get("podGroupTemplates")
    if not isinstance(templates, list) or not templates:
        return [("spec.podGroupTemplates", "Required value")]
    for i, template in enumerate(templates):
        where = f"spec.podGroupTemplates[{i}]"
        if not isinstance(template, dict) or not template.get("name"):
            causes.append((f"{where}.name", "Required value"))
            continue
        _scheduling_policy_causes(template.get("schedulingPolicy"), f"{where}.schedulingPolicy", causes)
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
