"""How KAI's topology allocate tests are written as kai-ray cases: the case record, sub-group
specs with their topology constraints, running and pending pods, and node layouts by level.
The cases themselves are in ``kai_allocate_tables`` and ``kai_multi_topology_tables``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.topology.cluster import TOPOLOGY, Job, Pod

RACK, SPINE, ZONE = "k8s.io/rack", "k8s.io/spine", "k8s.io/zone"
Nodes = dict[str, tuple[int, dict[str, str]]]


@dataclass(frozen=True)
class Case:
    name: str
    levels: tuple[str, ...]
    nodes: Nodes
    jobs: list[Job]
    expected: dict[str, str | None]
    reason: str = ""  # a fragment the pending job's reason must contain


def constraint(required: str = "", preferred: str = "", topology: str = TOPOLOGY) -> dict[str, Any]:
    out: dict[str, Any] = {"topology": topology}
    if required:
        out["requiredTopologyLevel"] = required
    if preferred:
        out["preferredTopologyLevel"] = preferred
    return out


def leaf(name: str, minimum: int = 1, parent: str | None = None, **level: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "minMember": minimum}
    if parent:
        out["parent"] = parent
    if level:
        out["topologyConstraint"] = constraint(**level)
    return out


def mid(name: str, parent: str | None = None, min_sub_group: int | None = None, **level: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if parent:
        out["parent"] = parent
    if min_sub_group is not None:
        out["minSubGroup"] = min_sub_group
    if level:
        out["topologyConstraint"] = constraint(**level)
    return out


def running(*nodes: str) -> tuple[Pod, ...]:
    return tuple(Pod(node=n) for n in nodes)


def pending(count: int, subgroup: str | None = None) -> tuple[Pod, ...]:
    return tuple(Pod(subgroup=subgroup) for _ in range(count))


def labelled(**by_node: tuple[int, dict[str, str]]) -> Nodes:
    return dict(by_node)


def rack_spine(gpus: int, layout: dict[str, tuple[str, str]]) -> Nodes:
    """KAI's two-level tests list rack above spine: ``layout`` is node -> (rack, spine)."""
    return {n: (gpus, {RACK: r, SPINE: s}) for n, (r, s) in layout.items()}


def zone_spine_rack(gpus: int, layout: dict[str, tuple[str, str, str]]) -> Nodes:
    return {n: (gpus, {ZONE: z, SPINE: s, RACK: r}) for n, (z, s, r) in layout.items()}


def even_tree(zones: int, spines: int, racks: int, per_rack: int, gpus: int) -> Nodes:
    """KAI's buildEvenlyDistributedTopologyNodes: node<i> numbered across zones, spines, racks."""
    nodes: Nodes = {}
    i = 0
    for z in range(1, zones + 1):
        for sp in range(1, spines + 1):
            spine = f"spine{sp + (z - 1) * spines}"
            for r in range(1, racks + 1):
                rack = f"rack{r + (sp - 1) * racks + (z - 1) * spines * racks}"
                for _ in range(per_rack):
                    nodes[f"node{i}"] = (gpus, {ZONE: f"zone{z}", SPINE: spine, RACK: rack})
                    i += 1
    return nodes


# allocate_multi_topology_test.go: sub-groups constrained by two different Topology objects.
RACK_DOMAIN, ZONE_DOMAIN = "topology.test/rack-domain", "topology.test/zone-domain"
