"""Which nodes KAI counts as MIG nodes, which kind of GPU request each takes, and how many GPUs
their free instances count for."""

from __future__ import annotations

import numpy as np

from kai_ray.model import GpuShare, MigMode, Node, ResourceVector
from placement.mig_nodes import (
    LEGACY_MIG_REFUSED,
    GpuKind,
    accepts,
    gpu_kind,
    mig_gpus_free,
    mig_modes,
    refusal_counts,
)
from placement.node_table import NodeTable
from placement.rows import export_rows, load_rows, table_from_rows
from placement.shapes import ResourceSchema, TaskShape
from shards.wire import pack_shapes, unpack_shapes

ENABLED = "node-role.kubernetes.io/mig-enabled"
STRATEGY = "nvidia.com/mig.strategy"


def table(*nodes: Node) -> NodeTable:
    return NodeTable(ResourceSchema.covering([n.allocatable for n in nodes]), nodes)


def mig_node(name: str, labels: dict[str, str], gpu: float = 0, **instances: float) -> Node:
    scalars = {f"nvidia.com/mig-{k.replace('_', '.')}": v for k, v in instances.items()}
    return Node(name, ResourceVector.of(cpu=8000, memory=2**34, gpu=gpu, pods=110, scalars=scalars), labels=labels)


def test_the_label_decides_when_present_else_offering_mig_instances_does() -> None:
    nodes = table(
        mig_node("offers", {}, **{"1g_5gb": 7}),
        mig_node("labelled-off", {ENABLED: "false"}, **{"1g_5gb": 7}),
        mig_node("label-not-a-boolean", {ENABLED: "yes"}, **{"1g_5gb": 7}),
        mig_node("labelled-on", {ENABLED: "True", STRATEGY: "mixed"}),
        mig_node("single", {ENABLED: "1", STRATEGY: "single"}, gpu=8),
        mig_node("odd-strategy", {ENABLED: "true", STRATEGY: "none"}, gpu=8),
        mig_node("plain", {}, gpu=8),
    )
    assert [MigMode(m) for m in mig_modes(nodes)] == [
        MigMode.ENABLED,
        MigMode.NONE,
        MigMode.NONE,
        MigMode.MIXED,
        MigMode.SINGLE,
        MigMode.ENABLED,
        MigMode.NONE,
    ]


def test_a_node_keeps_its_mode_in_copies_and_rows_and_a_new_label_changes_it() -> None:
    mixed = mig_node("mixed", {ENABLED: "true", STRATEGY: "mixed"}, **{"1g_5gb": 7})
    nodes = table(mig_node("plain", {}, gpu=8), mixed)
    expected = [MigMode.NONE, MigMode.MIXED]
    assert list(mig_modes(nodes.copy())) == expected
    assert list(mig_modes(table_from_rows(export_rows(nodes, [0, 1])))) == expected
    whole = TaskShape(ResourceVector.of(cpu=1000, gpu=1, pods=1))
    assert list(accepts(nodes, whole)) == [True, False]  # type: ignore[arg-type]
    nodes.update_node(mig_node("mixed", {ENABLED: "false"}, **{"1g_5gb": 7}))
    assert list(mig_modes(nodes)) == [MigMode.NONE, MigMode.NONE]
    assert accepts(nodes, whole) is None  # no MIG node left: every row takes it


def test_each_kind_of_request_goes_only_where_kai_lets_it() -> None:
    nodes = table(
        mig_node("plain", {}, gpu=8),
        mig_node("mixed", {ENABLED: "true", STRATEGY: "mixed"}, **{"1g_5gb": 7}),
        mig_node("single", {ENABLED: "true", STRATEGY: "single"}, gpu=8),
        mig_node("enabled", {ENABLED: "true"}, gpu=8, **{"1g_5gb": 7}),
    )
    mig = TaskShape(ResourceVector.of(cpu=1000, scalars={"nvidia.com/mig-1g.5gb": 1}, pods=1))
    whole = TaskShape(ResourceVector.of(cpu=1000, gpu=1, pods=1))
    fraction = TaskShape(ResourceVector.of(cpu=1000, pods=1), GpuShare(fraction=0.5))
    cpu = TaskShape(ResourceVector.of(cpu=1000, pods=1))
    assert [gpu_kind(s) for s in (mig, whole, fraction, cpu)] == [
        GpuKind.MIG,
        GpuKind.WHOLE,
        GpuKind.SHARED,
        GpuKind.CPU_ONLY,
    ]
    assert list(accepts(nodes, mig)) == [False, True, False, True]  # type: ignore[arg-type]
    assert list(accepts(nodes, whole)) == [True, False, True, True]  # type: ignore[arg-type]
    assert list(accepts(nodes, fraction)) == [True, False, False, True]  # type: ignore[arg-type]
    assert accepts(nodes, cpu) is None


def test_requests_without_mig_cost_nothing_on_a_cluster_without_mig() -> None:
    nodes = table(mig_node("a", {}, gpu=8), mig_node("b", {}, gpu=4))
    assert accepts(nodes, TaskShape(ResourceVector.of(gpu=1, pods=1))) is None


def test_free_instances_count_as_their_profiles_gpus() -> None:
    nodes = table(mig_node("a", {}, **{"1g_5gb": 2, "3g_20gb": 2}), mig_node("b", {}, gpu=8))
    assert list(mig_gpus_free(nodes, np.arange(2))) == [8.0, 0.0]


def test_a_mode_worked_out_by_the_reader_wins_and_travels_with_the_rows() -> None:
    """A reader sees what the table cannot (a configured label key, a profile listed at zero): the
    node's own mode is taken as it is, by copies, row exports and rows loaded into another table."""
    told = Node("told", ResourceVector.of(cpu=8000, gpu=8, pods=110), mig_mode=MigMode.MIXED)
    nodes = table(mig_node("plain", {}, gpu=8), told)
    expected = [MigMode.NONE, MigMode.MIXED]
    assert list(mig_modes(nodes)) == expected
    assert list(mig_modes(nodes.copy())) == expected
    assert list(mig_modes(table_from_rows(export_rows(nodes, [0, 1])))) == expected
    other = NodeTable(nodes.schema)
    load_rows(other, export_rows(nodes, [1, 0]))
    assert [MigMode(m) for m in mig_modes(other)] == [MigMode.MIXED, MigMode.NONE]


def test_no_node_takes_a_legacy_mig_pod_whatever_its_mode() -> None:
    nodes = table(
        mig_node("plain", {}, gpu=8),
        mig_node("mixed", {ENABLED: "true", STRATEGY: "mixed"}, **{"1g_5gb": 7}),
        mig_node("enabled", {ENABLED: "true"}, gpu=8, **{"1g_5gb": 7}),
    )
    legacy = TaskShape(ResourceVector.of(cpu=1000, scalars={"nvidia.com/mig-1g.5gb": 1}, pods=1), legacy_mig=True)
    assert gpu_kind(legacy) is GpuKind.LEGACY_MIG
    assert list(accepts(nodes, legacy)) == [False, False, False]  # type: ignore[arg-type]
    assert refusal_counts(nodes, legacy, np.ones(3, dtype=bool)) == {LEGACY_MIG_REFUSED: 3}
    plain_only = table(mig_node("plain", {}, gpu=8))
    cpu_legacy = TaskShape(ResourceVector.of(cpu=1000, pods=1), legacy_mig=True)
    assert list(accepts(plain_only, cpu_legacy)) == [False]  # type: ignore[arg-type]
    assert unpack_shapes(pack_shapes([legacy, cpu_legacy])) == (legacy, cpu_legacy)
