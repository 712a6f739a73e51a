"""What a pod asks for (its containers' requests, limits where requests are missing, init
containers, RuntimeClass overhead) and what a node offers, as resource vectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from kai_ray.io.fields import ObjectReader
from kai_ray.model import GPU_RESOURCE, ResourceVector

_CORE_NAMES = {"cpu", "memory", GPU_RESOURCE, "pods"}
_IGNORED_RESOURCES = {"ephemeral-storage", "storage"}
# Pods of one workload share their resources sections: what they add up to is worked out once
# per distinct text of those sections (a quarter of the first deltas of 10,000 template-made pods).
_REQUESTS_BY_TEXT: dict[bytes, ResourceVector] = {}
_MAX_REMEMBERED = 4096


def resource_vector(reader: ObjectReader, path: str, values: Mapping[str, Any], namespaced: bool) -> ResourceVector:
    amounts: dict[str, float] = {}
    for name, raw in values.items():
        if name in _IGNORED_RESOURCES or name.startswith("hugepages-"):
            continue
        amounts[name] = reader.quantity(f"{path}.{name}", raw, "cpu" if name == "cpu" else name, namespaced)
    scalars = {k: v for k, v in amounts.items() if k not in _CORE_NAMES}
    return ResourceVector.of(
        cpu=amounts.get("cpu", 0.0),
        memory=amounts.get("memory", 0.0),
        gpu=amounts.get(GPU_RESOURCE, 0.0),
        pods=amounts.get("pods", 0.0),
        scalars=scalars,
    )


def _container_requests(reader: ObjectReader, path: str, containers: list[Any]) -> list[ResourceVector]:
    vectors = []
    for i, container in enumerate(containers):
        if not isinstance(container, Mapping):
            raise reader.fail(f"{path}[{i}]", "must be a mapping")
        resources = container.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise reader.fail(f"{path}[{i}].resources", "must be a mapping")
        sections: dict[str, Mapping[str, Any]] = {}
        for section in ("requests", "limits"):
            value = resources.get(section) or {}
            if not isinstance(value, Mapping):
                raise reader.fail(f"{path}[{i}].resources.{section}", "must be a mapping")
            sections[section] = value
        requests = dict(sections["requests"])
        # The API server defaults a missing request to the limit; snapshots of raw manifests may not have it yet.
        for name, value in sections["limits"].items():
            requests.setdefault(name, value)
        vectors.append(resource_vector(reader, f"{path}[{i}].resources.requests", requests, True))
    return vectors


def _max(a: ResourceVector, b: ResourceVector) -> ResourceVector:
    names = set(a.scalars) | set(b.scalars)
    return ResourceVector.of(
        max(a.cpu, b.cpu),
        max(a.memory, b.memory),
        max(a.gpu, b.gpu),
        0,
        {n: max(a.scalars.get(n, 0.0), b.scalars.get(n, 0.0)) for n in names},
    )


def _resources_text(spec: Any) -> bytes | None:
    """The parts of a pod spec its requests depend on, as one key; None when they are not plain
    JSON-like values (then the pod is parsed the long way, which says what is wrong)."""
    try:
        text = orjson.dumps(
            [
                [c.get("resources") or {} for c in spec.get("containers") or ()],
                [c.get("resources") or {} for c in spec.get("initContainers") or ()],
                spec.get("overhead") or {},
            ],
            option=orjson.OPT_SORT_KEYS,
        )
    except (AttributeError, TypeError, orjson.JSONEncodeError):
        return None
    # orjson writes NaN and infinity as null, the same as a real null: such a pod is not keyed.
    return None if b"null" in text else text


def pod_requests(reader: ObjectReader) -> ResourceVector:
    text = _resources_text(reader.get("spec", None))
    if text is None:
        return _sum_requests(reader)
    known = _REQUESTS_BY_TEXT.get(text)
    if known is None:
        known = _sum_requests(reader)  # raises on a malformed section: nothing is remembered then
        if len(_REQUESTS_BY_TEXT) >= _MAX_REMEMBERED:
            _REQUESTS_BY_TEXT.clear()
        _REQUESTS_BY_TEXT[text] = known
    return known


def _sum_requests(reader: ObjectReader) -> ResourceVector:
    containers = reader.sequence("spec.containers")
    if not containers:
        raise reader.fail("spec.containers", "missing")
    total = ResourceVector()
    for vector in _container_requests(reader, "spec.containers", containers):
        total = total + vector
    # Effective request: init containers run one at a time, before the app containers.
    for vector in _container_requests(reader, "spec.initContainers", reader.sequence("spec.initContainers")):
        total = _max(total, vector)
    overhead = reader.mapping("spec.overhead")
    if overhead:  # RuntimeClass overhead counts too (KAI ignores it: issue #373)
        total = total + resource_vector(reader, "spec.overhead", overhead, True)
    return ResourceVector.of(total.cpu, total.memory, total.gpu, 1, total.scalars)
