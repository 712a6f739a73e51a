"""KAI's Topology (``kai.scheduler/v1alpha1``) and the topology constraints that refer to one.

A Topology lists node labels from the top of the physical hierarchy down (zone, block, rack,
host). Nodes that carry every level's label fall into nested *domains*: the nodes sharing a
zone value, within that the ones sharing a rack value, and so on. A constraint names a
Topology and a level by its node label or its alias: a *required* level keeps all pods of a
gang (or sub-group) inside one domain of that level; a *preferred* level packs them into as
few domains of that level as the required one allows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopologyLevel:
    node_label: str
    alias: str = ""


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[TopologyLevel, ...]

    def level_index(self, name: str) -> int | None:
        """The level ``name`` refers to, by node label or alias (KAI resolves aliases first)."""
        for i, level in enumerate(self.levels):
            if level.alias and level.alias == name:
                return i
        for i, level in enumerate(self.levels):
            if level.node_label == name:
                return i
        return None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(level.node_label for level in self.levels)


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """``topologyConstraint`` of a PodGroup or sub-group; empty levels mean "not set"."""

    topology: str
    required: str = ""
    preferred: str = ""

    @property
    def active(self) -> bool:
        """KAI ignores a constraint that names no Topology."""
        return bool(self.topology)

    def describe(self) -> str:
        parts = [f"topology {self.topology}"]
        if self.required:
            parts.append(f"required {self.required}")
        if self.preferred:
            parts.append(f"preferred {self.preferred}")
        return ", ".join(parts)
