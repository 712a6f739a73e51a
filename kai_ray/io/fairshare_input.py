"""The fair-share input file of ``kai-ray fairshare`` (docs/architecture.md#fair-share-input).

Units here are the divider's own: gpu in devices, cpu in millicores, memory in bytes
(no 10^6 scaling as in Queue objects).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kai_ray.errors import InputError
from kai_ray.io.documents import read_documents
from kai_ray.io.fields import read_number
from kai_ray.model.fairshare import RESOURCES, Array, QueueSpec


@dataclass(frozen=True, slots=True)
class FairShareProblem:
    specs: list[QueueSpec]
    total: Array  # (3,)
    request: dict[str, tuple[float, float, float]]
    allocated: dict[str, tuple[float, float, float]]
    usage: dict[str, tuple[float, float, float]]
    k_value: float


def _number(value: Any, where: str) -> float:
    if isinstance(value, str):  # numbers here are YAML/JSON numbers, never quoted
        raise InputError(f"{where}: not a number: {value!r}")
    return read_number(value, where)


def _whole(value: Any, where: str) -> int:
    number = _number(value, where)
    if not number.is_integer():
        raise InputError(f"{where}: must be a whole number, got {value!r}")
    return int(number)


def _bounded(value: float, where: str) -> float:
    if value < 0 and value != -1:
        raise InputError(f"{where}: must be -1 or at least 0, got {value:g}")
    return value


def load_fairshare_problem(path: str | Path) -> FairShareProblem:
    documents = read_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InputError(f"{path}: expected one mapping with total, kValue and queues")
    return fairshare_problem_from_mapping(documents[0], str(path))


def fairshare_problem_from_mapping(data: Mapping[str, Any], source: str = "<fairshare>") -> FairShareProblem:
    total_raw = data.get("total") or {}
    if not isinstance(total_raw, Mapping):
        raise InputError(f"{source}: total: must be a mapping")
    total = np.array([_number(total_raw.get(r, 0), f"{source}: total.{r}") for r in RESOURCES])
    if (total < 0).any():
        raise InputError(f"{source}: total: amounts must not be negative")
    k_value = _number(data.get("kValue", 0), f"{source}: kValue")
    if k_value < 0:  # as in the scheduler config: a negative k would reward past usage
        raise InputError(f"{source}: kValue: must not be negative, got {k_value:g}")
    queues_raw = data.get("queues")
    if not isinstance(queues_raw, list):
        raise InputError(f"{source}: queues: missing or not a list")
    specs: list[QueueSpec] = []
    request: dict[str, tuple[float, float, float]] = {}
    allocated: dict[str, tuple[float, float, float]] = {}
    usage: dict[str, tuple[float, float, float]] = {}
    for i, raw in enumerate(queues_raw):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise InputError(f"{source}: queues[{i}].name: missing")
        name = raw["name"]
        if name in request:
            raise InputError(f"{source}: queue {name}: name appears twice")
        where = f"{source}: queue {name}"
        resources = raw.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise InputError(f"{where}: resources: must be a mapping")
        fields: dict[str, list[float]] = {
            f: [] for f in ("quota", "overQuotaWeight", "limit", "request", "allocated", "usage")
        }
        for r in RESOURCES:
            block = resources.get(r) or {}
            if not isinstance(block, Mapping):
                raise InputError(f"{where}: resources.{r}: must be a mapping")
            defaults = {"quota": 0, "overQuotaWeight": 1, "limit": -1, "request": 0, "allocated": 0, "usage": 0}
            for field, default in defaults.items():
                value = _number(block.get(field, default), f"{where}: resources.{r}.{field}")
                if field in ("quota", "limit"):
                    value = _bounded(value, f"{where}: resources.{r}.{field}")
                elif field != "usage" and value < 0:
                    raise InputError(f"{where}: resources.{r}.{field}: must not be negative")
                fields[field].append(value)
        parent = raw.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise InputError(f"{where}: parent: must be a queue name or null")
        specs.append(
            QueueSpec(
                name=name,
                parent=parent,
                priority=_whole(raw.get("priority", 100), f"{where}: priority"),
                created=_number(raw.get("creationOrder", 0), f"{where}: creationOrder"),
                deserved=_triple(fields["quota"]),
                over_quota_weight=_triple(fields["overQuotaWeight"]),
                limit=_triple(fields["limit"]),
            )
        )
        request[name] = _triple(fields["request"])
        allocated[name] = _triple(fields["allocated"])
        usage[name] = _triple(fields["usage"])
    _check_tree(specs, source)
    return FairShareProblem(specs, total, request, allocated, usage, k_value)


def _triple(values: list[float]) -> tuple[float, float, float]:
    return (values[0], values[1], values[2])


def _check_tree(specs: list[QueueSpec], source: str) -> None:
    parents = {s.name: s.parent for s in specs}
    for spec in specs:
        if spec.parent is not None and spec.parent not in parents:
            raise InputError(f"{source}: queue {spec.name}: parent: no queue named {spec.parent!r}")
        seen = {spec.name}
        ancestor = spec.parent
        while ancestor is not None:
            if ancestor in seen:
                raise InputError(f"{source}: queue {spec.name}: parent: cycle through {ancestor!r}")
            seen.add(ancestor)
            ancestor = parents.get(ancestor)
