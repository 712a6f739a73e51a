"""KAI's multi-topology allocate case: two topologies over the same nodes, as data for
test_kai_allocate_tables."""

from __future__ import annotations

from tests.topology.cluster import Job
from tests.topology.kai_case_builders import RACK_DOMAIN, ZONE_DOMAIN, Case, Nodes, leaf, pending, running


def _two_topology_nodes(layout: dict[str, tuple[str, str]]) -> Nodes:
    return {n: (8, {RACK_DOMAIN: r, ZONE_DOMAIN: z}) for n, (r, z) in layout.items()}


MULTI_TOPOLOGY_CASES = [
    Case(
        "Two sub-groups constrained by different Topology objects",
        (),
        _two_topology_nodes(
            {
                "node0": ("rack-a", "zone-x"),
                "node1": ("rack-a", "zone-y"),
                "node2": ("rack-b", "zone-x"),
                "node3": ("rack-b", "zone-y"),
                "node4": ("rack-c", "zone-x"),
                "node5": ("rack-c", "zone-y"),
            }
        ),
        [
            Job("seed-rack-a", 4, running("node0")),
            Job("seed-zone-x", 4, running("node2")),
            Job(
                "pending-job0",
                4,
                (*pending(3, "rack-workers"), *pending(3, "zone-workers")),
                {
                    "minSubGroup": 2,
                    "subGroups": [
                        leaf("rack-workers", 3, topology="rack-topology", required=RACK_DOMAIN),
                        leaf("zone-workers", 3, topology="zone-topology", required=ZONE_DOMAIN),
                    ],
                },
            ),
        ],
        # rack-workers share rack-a (node0 and node1), zone-workers share zone-x (node2 and node4)
        {
            "pending-job0-0": "node0",
            "pending-job0-1": "node1",
            "pending-job0-2": "node1",
            "pending-job0-3": "node2",
            "pending-job0-4": "node4",
            "pending-job0-5": "node4",
        },
    ),
]
