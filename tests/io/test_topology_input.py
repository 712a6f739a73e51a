"""Topology objects, topology constraints and sub-group trees in snapshots: KAI's validation as
one-line errors, the lenient readings as warnings (docs/architecture.md#snapshot-input)."""

from __future__ import annotations

from typing import Any

import pytest

from kai_ray.errors import InputError
from kai_ray.io.snapshot_loader import snapshot_from_documents
from kai_ray.model import SubGroup, TopologyConstraint

Doc = dict[str, Any]


def topology(levels: list[Doc]) -> Doc:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": levels},
    }


def pod_group(spec: Doc) -> Doc:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}


def test_levels_and_aliases_are_read_and_a_constraint_may_name_either() -> None:
    snap = snapshot_from_documents(
        [topology([{"nodeLabel": "example.com/zone", "alias": "zone"}, {"nodeLabel": "kubernetes.io/hostname"}])]
    )
    [topo] = snap.topologies
    assert topo.labels == ("example.com/zone", "kubernetes.io/hostname")
    assert topo.level_index("zone") == topo.level_index("example.com/zone") == 0
    assert topo.level_index("rack") is None


@pytest.mark.parametrize(
    ("levels", "field", "problem"),
    [
        ([], "spec.levels", "at least one level"),
        ([{"nodeLabel": "a/b"}, {"nodeLabel": "a/b"}], "spec.levels[1].nodeLabel", "appears twice"),
        ([{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}], "spec.levels[0].nodeLabel", "lowest level"),
        ([{"nodeLabel": "-bad-"}], "spec.levels[0].nodeLabel", "node label key"),
        ([{"nodeLabel": "zone", "alias": "x"}, {"nodeLabel": "rack", "alias": "x"}], "spec.levels[0].alias", "unique"),
        ([{"nodeLabel": "zone", "alias": "rack"}, {"nodeLabel": "rack"}], "spec.levels[0].alias", "unique"),
    ],
)
def test_a_broken_topology_is_one_line_naming_the_field(levels: list[Doc], field: str, problem: str) -> None:
    with pytest.raises(InputError) as err:
        snapshot_from_documents([topology(levels)])
    assert str(err.value).startswith(f"Topology t: {field}: ") and problem in str(err.value)


def test_the_sub_group_tree_and_constraints_are_read() -> None:
    rack = {"topology": "t", "requiredTopologyLevel": "rack"}
    spec = {
        "minSubGroup": 2,
        "topologyConstraint": {"topology": "t", "preferredTopologyLevel": "zone"},
        "subGroups": [
            {"name": "ab", "minSubGroup": 1},
            {"name": "a", "parent": "ab", "minMember": 2, "topologyConstraint": rack},
            {"name": "b", "parent": "ab", "minMember": 1},
            {"name": "c", "minMember": 0},
        ],
    }
    [group] = snapshot_from_documents([pod_group(spec)]).pod_groups
    assert group.min_sub_group == 2 and group.topology == TopologyConstraint("t", preferred="zone")
    assert group.sub_groups == (
        SubGroup("ab", 0, None, 1),
        SubGroup("a", 2, "ab", None, TopologyConstraint("t", "rack")),
        SubGroup("b", 1, "ab"),
        SubGroup("c", 0),
    )


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        (
            {"minMember": 2, "minSubGroup": 1, "subGroups": [{"name": "a", "minMember": 1}]},
            "spec.minSubGroup",
            "exclusive",
        ),
        (
            {"subGroups": [{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}]},
            "spec.subGroups[1].name",
            "duplicate",
        ),
        ({"subGroups": [{"name": "a", "parent": "x", "minMember": 1}]}, "spec.subGroups[0].parent", "does not exist"),
        (
            {"subGroups": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]},
            "spec.subGroups[0].parent",
            "cycle",
        ),
        (
            {"subGroups": [{"name": "a", "minMember": 1, "minSubGroup": 1}]},
            "spec.subGroups[0].minSubGroup",
            "exclusive",
        ),
        ({"subGroups": [{"name": "a", "minMember": -1}]}, "spec.subGroups[0].minMember", ">= 0"),
        ({"topologyConstraint": {"topology": 3}}, "spec.topologyConstraint.topology", "string"),
    ],
)
def test_what_kais_webhook_refuses_is_a_one_line_error(spec: Doc, field: str, problem: str) -> None:
    with pytest.raises(InputError) as err:
        snapshot_from_documents([pod_group(spec)])
    assert str(err.value).startswith(f"PodGroup default/g: {field}: ") and problem in str(err.value)


def test_what_kai_admits_or_reads_leniently_is_a_warning_with_kais_reading() -> None:
    spec = {
        "minSubGroup": 3,
        "topologyConstraint": {"requiredTopologyLevel": "rack"},
        "subGroups": [
            {"name": "mid", "minMember": 4},
            {"name": "leaf", "parent": "mid", "minSubGroup": 1},
            {"name": "bare"},
        ],
    }
    snap = snapshot_from_documents([pod_group(spec)])
    [group] = snap.pod_groups
    assert group.topology is None  # no topology named: ignored, as KAI does
    assert [(s.name, s.min_member, s.min_sub_group) for s in group.sub_groups] == [
        ("mid", 0, None),
        ("leaf", 0, None),
        ("bare", 0, None),
    ]
    warnings = "\n".join(snap.report.warnings)
    for expected in (
        "spec.minSubGroup: 3 is more than its 2 direct sub-groups",
        "spec.topologyConstraint: levels without a topology name are ignored",
        "spec.subGroups[0].minMember: ignored on a sub-group with children",
        "spec.subGroups[1].minSubGroup: ignored on a sub-group without children",
        "spec.subGroups[2].minMember: missing on a leaf sub-group, read as 0",
    ):
        assert expected in warnings, warnings
