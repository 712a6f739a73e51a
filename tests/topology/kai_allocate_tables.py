"""The worked placements of KAI's topology allocate tests, as cases for kai-ray.

Facts taken from KAI Scheduler's ``pkg/scheduler/actions/allocate/allocateTopology_test.go``
and ``allocate_multi_topology_test.go`` (the cluster, each job's pods and sub-group tree, and
where KAI's allocate puts every pod), rewritten as the PodGroup specs a user would apply. Pods
are named ``<job>-<index>`` as in KAI's tests; ``expected`` gives each pod's node (None: it stays
pending). Every pod asks for ``gpus`` whole GPUs; nodes have plenty of CPU and memory.
"""

from __future__ import annotations

from typing import Any

from tests.topology.cluster import Job, Pod
from tests.topology.kai_case_builders import (
    RACK,
    SPINE,
    ZONE,
    Case,
    constraint,
    even_tree,
    leaf,
    mid,
    pending,
    rack_spine,
    running,
    zone_spine_rack,
)

TWO_BY_TWO = {
    "node0": ("rack1", "spine1"),
    "node1": ("rack1", "spine2"),
    "node2": ("rack2", "spine1"),
    "node3": ("rack2", "spine2"),
}
EIGHT_IN_TWO_ZONES = {
    "node0": ("zone1", "spine1", "rack1"),
    "node1": ("zone1", "spine1", "rack2"),
    "node2": ("zone1", "spine2", "rack3"),
    "node3": ("zone1", "spine2", "rack4"),
    "node4": ("zone2", "spine3", "rack5"),
    "node5": ("zone2", "spine3", "rack6"),
    "node6": ("zone2", "spine4", "rack7"),
    "node7": ("zone2", "spine4", "rack8"),
}
FOUR_IN_TWO_ZONES = {
    n: (4, {ZONE: z, RACK: r})
    for n, (z, r) in {
        "node0": ("zone1", "rack1"),
        "node1": ("zone1", "rack2"),
        "node2": ("zone2", "rack3"),
        "node3": ("zone2", "rack4"),
    }.items()
}


REPLICA_LEAVES = ("rep1-sub-a", "rep1-sub-b", "rep2-sub-a", "rep2-sub-b")
CODEC_LEAVES = ("encoder1", "decoder1", "encoder2", "decoder2")


def replicas_job(
    root: dict[str, str], replica: dict[str, str], leaves: dict[str, str], names: tuple[str, ...] = REPLICA_LEAVES
) -> Job:
    """pending_job0 (2 GPUs a pod): two replicas under the root, each with two one-pod leaves
    named ``names``; ``root``, ``replica`` and ``leaves`` are their constraints' levels."""
    subs = [mid("replica1", **replica), mid("replica2", **replica)]
    for i, name in enumerate(names):
        subs.append(leaf(name, parent=f"replica{i // 2 + 1}", **leaves))
    spec: dict[str, Any] = {"subGroups": subs}
    if root:
        spec["topologyConstraint"] = constraint(**root)
    return Job("pending_job0", 2, tuple(Pod(subgroup=s) for s in names), spec)


CASES = [
    Case(
        "Required topology level - schedule all tasks on the same rack",
        (RACK,),
        {
            "node0": (1, {RACK: "rack1"}),
            "node1": (1, {RACK: "rack1"}),
            "node2": (1, {RACK: "rack2"}),
            "node3": (1, {RACK: "rack2"}),
        },
        [
            Job("running_job0", 1, running("node0")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(RACK)}),
        ],
        {"pending_job0-0": "node2", "pending_job0-1": "node3"},
    ),
    Case(
        "Required topology level - could not schedule on first domain due to affinity, goes to next",
        (RACK,),
        {
            "node0": (1, {RACK: "rack1"}),
            "node1": (1, {RACK: "rack1"}),
            "node2": (1, {RACK: "rack2", "kai.test/affinity": "affinity1"}),
            "node3": (1, {RACK: "rack2", "kai.test/affinity": "affinity1"}),
        },
        [Job("pending_job0", 1, (Pod(affinity="affinity1"), Pod()), {"topologyConstraint": constraint(RACK)})],
        {"pending_job0-0": "node2", "pending_job0-1": "node3"},
    ),
    Case(
        "Required topology with multiple levels - schedule all tasks on the same spine",
        (RACK, SPINE),
        rack_spine(2, {"node0": ("rack1", "spine1"), "node1": ("rack1", "spine2")}),
        [
            Job("running_job0", 1, running("node0")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(SPINE)}),
        ],
        {"pending_job0-0": "node1", "pending_job0-1": "node1"},
    ),
    Case(
        "Required topology with multiple levels - schedule all tasks on the same rack",
        (RACK, SPINE),
        rack_spine(2, TWO_BY_TWO),
        [
            Job("running_job0", 1, running("node0")),
            Job("pending_job0", 1, pending(4), {"topologyConstraint": constraint(RACK)}),
        ],
        {"pending_job0-0": "node2", "pending_job0-1": "node2", "pending_job0-2": "node3", "pending_job0-3": "node3"},
    ),
    Case(
        "Required topology with multiple levels - schedule all tasks on the same partially occupied rack",
        (RACK, SPINE),
        rack_spine(2, {"node0": ("rack1", "spine1"), "node1": ("rack1", "spine2")}),
        [
            Job("running_job0", 1, running("node0")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(RACK)}),
        ],
        {"pending_job0-0": "node0", "pending_job0-1": "node1"},
    ),
    Case(
        "Required topology with multiple levels - job remains pending as no available rack can be found",
        (RACK, SPINE),
        rack_spine(2, TWO_BY_TWO),
        [
            Job("running_job0", 1, running("node0")),
            Job("running_job1", 1, running("node2")),
            Job("pending_job0", 1, pending(4), {"topologyConstraint": constraint(RACK)}),
        ],
        {f"pending_job0-{i}": None for i in range(4)},
        reason="no rack has 4 GPUs free for the 4 pods; best rack rack1 has 3 (room for 3 of the pods)",
    ),
    Case(
        "Preferred topology - schedule job on the same rack",
        (RACK,),
        {"node0": (2, {RACK: "rack1"}), "node1": (2, {RACK: "rack2"})},
        [
            Job("running_job0", 1, running("node0")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(preferred=RACK)}),
        ],
        {"pending_job0-0": "node1", "pending_job0-1": "node1"},
    ),
    Case(
        "Preferred topology - schedule job even if preferred constraint can't be met",
        (RACK,),
        {"node0": (2, {RACK: "rack1"}), "node1": (2, {RACK: "rack2"})},
        [
            Job("running_job0", 1, running("node0")),
            Job("running_job1", 1, running("node1")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(preferred=RACK)}),
        ],
        {"pending_job0-0": "node1", "pending_job0-1": "node0"},
    ),
    Case(
        "Combined preferred and required topology constraints"
        " - schedule job although preferred constraint cannot be satisfied",
        (RACK, SPINE),
        rack_spine(2, TWO_BY_TWO),
        [
            Job("running_job0", 1, running("node0", "node0", "node1", "node2", "node3")),
            Job("pending_job0", 1, pending(2), {"topologyConstraint": constraint(RACK, SPINE)}),
        ],
        {"pending_job0-0": "node3", "pending_job0-1": "node2"},
    ),
    Case(
        "Required topology at multiple subgroup hierarchy levels"
        " - subgroup on the same rack and workload in the same zone",
        (ZONE, RACK),
        {
            n: (2, {ZONE: z, RACK: r})
            for n, (z, r) in {
                "node0": ("zone1", "rack1"),
                "node1": ("zone1", "rack2"),
                "node2": ("zone2", "rack3"),
                "node3": ("zone2", "rack4"),
            }.items()
        },
        [
            Job("running_job0", 2, running("node0")),
            Job(
                "pending_job0",
                2,
                (Pod(subgroup="sub-a"), Pod(subgroup="sub-b")),
                {
                    "topologyConstraint": constraint(ZONE),
                    "subGroups": [leaf("sub-a", required=RACK), leaf("sub-b", required=RACK)],
                },
            ),
        ],
        {"pending_job0-0": "node2", "pending_job0-1": "node3"},
    ),
    Case(
        "Required topology at multiple subgroup hierarchy levels - rack, spine and zone",
        (ZONE, SPINE, RACK),
        zone_spine_rack(2, EIGHT_IN_TWO_ZONES),
        [
            Job("running_job0", 2, running("node0")),
            replicas_job({"required": ZONE}, {"required": SPINE}, {"required": RACK}),
        ],
        {"pending_job0-0": "node4", "pending_job0-1": "node5", "pending_job0-2": "node6", "pending_job0-3": "node7"},
    ),
    Case(
        "Required topology constraint - prefer packed domain",
        (RACK,),
        {"node0": (10, {RACK: "rack1"}), "node1": (10, {RACK: "rack2"})},
        [
            Job("running_job0", 1, running("node1")),
            Job("pending_job0", 1, pending(1, "sub-a"), {"subGroups": [leaf("sub-a", required=RACK)]}),
        ],
        {"pending_job0-0": "node1"},
    ),
    Case(
        "Preferred topology at multiple subgroup hierarchy levels - rack and zone",
        (ZONE, RACK),
        FOUR_IN_TWO_ZONES,
        [
            Job("running_job0", 1, running("node0")),
            replicas_job({"preferred": ZONE}, {"preferred": RACK}, {}, CODEC_LEAVES),
        ],
        {"pending_job0-0": "node2", "pending_job0-1": "node2", "pending_job0-2": "node3", "pending_job0-3": "node3"},
    ),
    Case(
        "Required and preferred topology constraints combined at different levels - rack and zone",
        (ZONE, RACK),
        FOUR_IN_TWO_ZONES,
        [
            Job("running_job0", 1, running("node0")),
            replicas_job({"preferred": ZONE}, {"required": RACK}, {}, CODEC_LEAVES),
        ],
        {"pending_job0-0": "node2", "pending_job0-1": "node2", "pending_job0-2": "node3", "pending_job0-3": "node3"},
    ),
    Case(
        "Required and preferred topology constraints with single unconstrained level",
        (ZONE, SPINE, RACK),
        zone_spine_rack(2, EIGHT_IN_TWO_ZONES),
        [
            Job("running_job0", 2, running("node0")),
            replicas_job({"preferred": ZONE}, {"required": SPINE}, {}),
        ],
        {"pending_job0-0": "node4", "pending_job0-1": "node5", "pending_job0-2": "node6", "pending_job0-3": "node7"},
    ),
    Case(
        "Combined preferred and required topology constraints - preferred level respected when possible",
        (RACK, SPINE),
        rack_spine(1, {f"node{i}": ("rack1", f"spine{i // 2 + 1}") for i in range(8)}),
        [Job("pending_job0", 1, pending(3), {"topologyConstraint": constraint(RACK, SPINE)})],
        {"pending_job0-0": "node6", "pending_job0-1": "node7", "pending_job0-2": "node4"},
    ),
    Case(
        "Elastic subgroups with required topology constraints",
        (RACK,),
        {"node0": (2, {RACK: "rack1"}), "node1": (2, {RACK: "rack2"})},
        [
            Job(
                "pending_job0",
                1,
                (*pending(2, "subgroup-a"), *pending(2, "subgroup-b")),
                {"subGroups": [leaf("subgroup-a", preferred=RACK), leaf("subgroup-b", preferred=RACK)]},
            )
        ],
        {"pending_job0-0": "node0", "pending_job0-1": "node1", "pending_job0-2": "node0", "pending_job0-3": "node1"},
    ),
    Case(
        "Hierarchical Preferred Topology - PodGroup prefers Spine, SubGroups has no preference",
        (ZONE, SPINE, RACK),
        even_tree(1, 2, 2, 2, 1),
        [
            Job(
                "pending_job0",
                1,
                tuple(Pod(subgroup=f"pod-{g}-{i}") for g in "ab" for i in (1, 2, 3)),
                {
                    "topologyConstraint": constraint(preferred=SPINE),
                    "subGroups": [
                        mid("subgroup-a"),
                        mid("subgroup-b"),
                        *(leaf(f"pod-{g}-{i}", parent=f"subgroup-{g}") for g in "ab" for i in (1, 2, 3)),
                    ],
                },
            )
        ],
        {
            "pending_job0-0": "node4",
            "pending_job0-1": "node5",
            "pending_job0-2": "node6",
            "pending_job0-3": "node7",
            "pending_job0-4": "node0",
            "pending_job0-5": "node1",
        },
    ),
    Case(
        "Hierarchical Conflicting Preferred Topology - PodGroup prefers Spine, SubGroups prefer Rack",
        (ZONE, SPINE, RACK),
        even_tree(1, 2, 2, 2, 1),
        [
            Job(
                "pending_job0",
                1,
                tuple(Pod(subgroup=f"pod-{g}-{i}") for g in "ab" for i in (1, 2, 3)),
                {
                    "topologyConstraint": constraint(preferred=SPINE),
                    "subGroups": [
                        mid("subgroup-a", preferred=RACK),
                        mid("subgroup-b", preferred=RACK),
                        *(leaf(f"pod-{g}-{i}", parent=f"subgroup-{g}") for g in "ab" for i in (1, 2, 3)),
                    ],
                },
            )
        ],
        {
            "pending_job0-0": "node2",
            "pending_job0-1": "node3",
            "pending_job0-2": "node0",
            "pending_job0-3": "node6",
            "pending_job0-4": "node7",
            "pending_job0-5": "node4",
        },
    ),
    Case(
        "Bin Packing - allocate on domain with least free resources (most occupied)",
        (ZONE, SPINE, RACK),
        even_tree(1, 2, 2, 2, 1),
        [
            Job("running_job0", 1, running("node0", "node1", "node2")),
            Job("pending_job0", 1, pending(1), {"topologyConstraint": constraint(preferred=SPINE)}),
        ],
        {"pending_job0-0": "node3"},
    ),
    Case(
        "Bin Packing - Pack Top-Most domain first",
        (ZONE, SPINE, RACK),
        zone_spine_rack(
            1,
            {
                "node0": ("zone1", "spine1", "rack1"),
                "node1": ("zone1", "spine1", "rack2"),
                "node2": ("zone1", "spine1", "rack3"),
                "node3": ("zone1", "spine2", "rack4"),
                "node4": ("zone1", "spine2", "rack4"),
            },
        ),
        [Job("pending_job0", 1, pending(1), {"topologyConstraint": constraint(preferred=RACK)})],
        {"pending_job0-0": "node3"},
    ),
]
