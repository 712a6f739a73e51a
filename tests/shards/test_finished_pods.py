"""A pod that finishes on its node frees what it held on the shard."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kai_ray.model import Pod, PodState, ResourceVector
from placement.placer import PlacementPolicy
from placement.shapes import GPU
from shards.messages import ShardDeltas
from shards.shard import Shard
from tests.builders import node


@pytest.mark.parametrize("end", [PodState.SUCCEEDED, PodState.FAILED])
def test_succeeded_and_failed_pods_keep_their_node_but_hold_nothing(end: PodState) -> None:
    shard = Shard(0, PlacementPolicy())
    running = Pod("ns", "p", state=PodState.RUNNING, node="a", requests=ResourceVector.of(gpu=8, cpu=1000, pods=1))
    shard.apply(ShardDeltas(nodes_upserted=(node("a", gpu=8),), pods_upserted=(running,)))
    row = shard.table.index["a"]
    assert shard.table.idle[row, GPU] == 0
    shard.apply(ShardDeltas(pods_upserted=(replace(running, state=end),)))
    assert shard.table.idle[row, GPU] == 8 and "ns/p" not in shard.pods
