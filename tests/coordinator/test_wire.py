"""What travels between kai-ray's Ray processes comes back equal, read-only maps included, and
rows of nodes that carry the same taints pickle those taints once."""

from __future__ import annotations

from hypothesis import given, settings

from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.wire import pack, unpack
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot
from placement.node_table import NodeTable
from placement.rows import export_rows
from placement.shapes import ResourceSchema
from tests.coordinator.random_clusters import clusters


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_a_cluster_packed_and_unpacked_is_the_same_cluster(snapshot: ClusterSnapshot) -> None:
    deltas = ClusterDeltas.of_snapshot(snapshot)
    again = unpack(pack(deltas))
    assert again == deltas
    for before, after in zip(deltas.nodes_upserted, again.nodes_upserted, strict=True):
        assert dict(after.labels) == dict(before.labels)
        assert type(after.labels) is type(before.labels)  # still read-only where it was


def test_rows_of_nodes_with_the_same_taints_carry_each_set_of_taints_once() -> None:
    nodes = model_nodes(2_000, taint=True)
    table = NodeTable(ResourceSchema.covering([n.allocatable for n in nodes]), nodes)
    rows = export_rows(table, range(len(nodes)))
    distinct = {id(t) for t in rows.taints}
    assert len(distinct) == len(set(rows.taints))  # one object per distinct set
    again = unpack(pack(rows))
    assert again.taints == rows.taints and again.names == rows.names
    assert len({id(t) for t in again.taints}) == len(distinct)
