"""KAI's Topology kind and the ``topologyConstraint`` blocks that refer to one.

Validation follows KAI's CRD and webhook: 1 to 16 levels, each a valid label key, unique;
``kubernetes.io/hostname`` only as the lowest level; aliases unique and distinct from every
node label. A broken Topology is an input error (KAI's API server would refuse it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_ray import labels as L
from kai_ray.io.fields import ObjectReader
from kai_ray.model import Topology, TopologyConstraint, TopologyLevel

HOSTNAME_LABEL = "kubernetes.io/hostname"
MAX_LEVELS = 16


def parse_topology(reader: ObjectReader) -> Topology:
    levels_raw = reader.sequence("spec.levels", namespaced=False)
    if not levels_raw:
        raise reader.fail("spec.levels", "must list at least one level", namespaced=False)
    if len(levels_raw) > MAX_LEVELS:
        raise reader.fail("spec.levels", f"at most {MAX_LEVELS} levels, got {len(levels_raw)}", namespaced=False)
    levels: list[TopologyLevel] = []
    for i, raw in enumerate(levels_raw):
        path = f"spec.levels[{i}]"
        if not isinstance(raw, Mapping):
            raise reader.fail(path, "must be a mapping", namespaced=False)
        label = raw.get("nodeLabel")
        if not isinstance(label, str) or not L.is_label_key(label):
            raise reader.fail(f"{path}.nodeLabel", f"must be a node label key, got {label!r}", namespaced=False)
        alias = raw.get("alias") or ""
        if not isinstance(alias, str) or (alias and not L.is_label_key(alias)):
            raise reader.fail(f"{path}.alias", f"must be a label-like name, got {alias!r}", namespaced=False)
        levels.append(TopologyLevel(label, alias))
    labels = [level.node_label for level in levels]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise reader.fail(f"spec.levels[{i}].nodeLabel", f"{label!r} appears twice", namespaced=False)
        if label == HOSTNAME_LABEL and i != len(labels) - 1:
            raise reader.fail(
                f"spec.levels[{i}].nodeLabel", f"{HOSTNAME_LABEL} can only be the lowest level", namespaced=False
            )
    aliases = [level.alias for level in levels if level.alias]
    for i, level in enumerate(levels):
        if level.alias and (aliases.count(level.alias) > 1 or level.alias in labels):
            raise reader.fail(
                f"spec.levels[{i}].alias", f"{level.alias!r} must be unique and not a node label", namespaced=False
            )
    return Topology(reader.name, tuple(levels))


def parse_constraint(reader: ObjectReader, path: str, raw: Any, warnings: list[str]) -> TopologyConstraint | None:
    """A ``topologyConstraint`` block; None when absent or when it names no Topology (KAI then
    ignores its levels, which is worth a warning)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise reader.fail(path, "must be a mapping")
    values: dict[str, str] = {}
    for field in ("topology", "requiredTopologyLevel", "preferredTopologyLevel"):
        value = raw.get(field)
        if value is not None and not isinstance(value, str):
            raise reader.fail(f"{path}.{field}", f"must be a string, got {value!r}")
        values[field] = value or ""
    if not values["topology"]:
        if values["requiredTopologyLevel"] or values["preferredTopologyLevel"]:
            warnings.append(f"{reader.ident()}: {path}: levels without a topology name are ignored (as KAI does)")
        return None
    return TopologyConstraint(values["topology"], values["requiredTopologyLevel"], values["preferredTopologyLevel"])
