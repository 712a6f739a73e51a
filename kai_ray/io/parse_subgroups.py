"""A PodGroup's gang shape: ``minMember`` or ``minSubGroup``, the ``subGroups`` tree, and the
topology constraints at each level.

What KAI's webhook refuses outright (both minimums on one level, duplicate names, a missing
parent, a cycle) is an input error. What it admits with a warning, or what its scheduler
reads leniently, is a warning here with KAI's reading: ``minSubGroup`` above the number of
children (the group then waits for ever), a leaf without ``minMember`` (read as 0), a
``minMember`` on a sub-group that has children (ignored) or a ``minSubGroup`` on a leaf
(ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_topology import parse_constraint
from kai_ray.model import SubGroup, TopologyConstraint


@dataclass(frozen=True, slots=True)
class GangSpec:
    min_member: int
    min_sub_group: int | None
    sub_groups: tuple[SubGroup, ...]
    topology: TopologyConstraint | None


def read_gang_spec(reader: ObjectReader, warnings: list[str]) -> GangSpec:
    spec = reader.mapping("spec")
    min_member = reader.integer("spec.minMember", 1)
    if min_member < 0:
        raise reader.fail("spec.minMember", "must be at least 0")
    min_sub_group = _optional_count(reader, "spec.minSubGroup", spec.get("minSubGroup"))
    if min_sub_group is not None and spec.get("minMember") is not None:
        raise reader.fail("spec.minSubGroup", "minMember and minSubGroup are mutually exclusive")
    topology = parse_constraint(reader, "spec.topologyConstraint", spec.get("topologyConstraint"), warnings)
    raw_subs = reader.sequence("spec.subGroups")
    sub_groups = _read_sub_groups(reader, raw_subs, warnings)
    if min_sub_group is not None:
        roots = sum(1 for s in sub_groups if s.parent is None)
        if min_sub_group > roots:
            warnings.append(
                f"{reader.ident()}: spec.minSubGroup: {min_sub_group} is more than its {roots} direct sub-groups;"
                " the PodGroup cannot be scheduled"
            )
    return GangSpec(min_member, min_sub_group, sub_groups, topology)


def _optional_count(reader: ObjectReader, path: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise reader.fail(path, f"must be a whole number >= 0, got {value!r}")
    return value


def _read_sub_groups(reader: ObjectReader, raw_subs: list[Any], warnings: list[str]) -> tuple[SubGroup, ...]:
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for i, sub in enumerate(raw_subs):
        if not isinstance(sub, Mapping) or not sub.get("name"):
            raise reader.fail(f"spec.subGroups[{i}].name", "missing")
        name = str(sub["name"])
        if any(name == seen for seen, _ in entries):
            raise reader.fail(f"spec.subGroups[{i}].name", f"duplicate sub-group {name!r}")
        entries.append((name, sub))
    names = {name for name, _ in entries}
    parents: dict[str, str | None] = {}
    for i, (name, sub) in enumerate(entries):
        parent = sub.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in names):
            raise reader.fail(f"spec.subGroups[{i}].parent", f"sub-group {parent!r} does not exist")
        parents[name] = parent or None
    for i, (name, _) in enumerate(entries):
        seen = {name}
        up = parents[name]
        while up is not None:
            if up in seen:
                raise reader.fail(f"spec.subGroups[{i}].parent", f"cycle through sub-group {name!r}")
            seen.add(up)
            up = parents[up]
    has_children = {p for p in parents.values() if p is not None}
    out: list[SubGroup] = []
    for i, (name, sub) in enumerate(entries):
        path = f"spec.subGroups[{i}]"
        minimum = _optional_count(reader, f"{path}.minMember", sub.get("minMember"))
        min_sub = _optional_count(reader, f"{path}.minSubGroup", sub.get("minSubGroup"))
        if minimum is not None and min_sub is not None:
            raise reader.fail(f"{path}.minSubGroup", "minMember and minSubGroup are mutually exclusive")
        children = sum(1 for p in parents.values() if p == name)
        where = f"{reader.ident()}: {path}"
        if name in has_children:
            if minimum is not None:
                warnings.append(f"{where}.minMember: ignored on a sub-group with children (use minSubGroup)")
            if min_sub is not None and min_sub > children:
                warnings.append(
                    f"{where}.minSubGroup: {min_sub} is more than its {children} children; it cannot be satisfied"
                )
            minimum = 0
        else:
            if min_sub is not None:
                warnings.append(f"{where}.minSubGroup: ignored on a sub-group without children")
                min_sub = None
            if minimum is None:
                warnings.append(f"{where}.minMember: missing on a leaf sub-group, read as 0 (as KAI's scheduler does)")
                minimum = 0
        topology = parse_constraint(reader, f"{path}.topologyConstraint", sub.get("topologyConstraint"), warnings)
        out.append(SubGroup(name, minimum, parents[name], min_sub, topology))
    return tuple(out)
