"""A pod that finished (Succeeded or Failed) still names its node but holds nothing on it."""

from __future__ import annotations

import pytest

from kai_ray.model import PodState
from shards.messages import ShardDeltas
from shards.shapes import GPU
from shards.shard import Shard
from tests.shards.catalog import Ask, make_node, make_pod


@pytest.mark.parametrize("final", [PodState.SUCCEEDED, PodState.FAILED])
def test_a_finished_pod_frees_its_node(final: PodState) -> None:
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=(make_node("n0", "gpu4"),)))
    whole = Ask(gpu=4, cpu=4000)
    shard.apply(ShardDeltas(pods_upserted=(make_pod("ns/a", whole, PodState.RUNNING, "n0"),)))
    assert shard.table.idle[0][GPU] == 0
    shard.apply(ShardDeltas(pods_upserted=(make_pod("ns/a", whole, final, "n0"),)))  # the kubelet reports it done
    assert shard.table.idle[0][GPU] == 4 and "ns/a" not in shard.pods
