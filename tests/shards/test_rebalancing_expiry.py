"""A reservation moved between shards by rebalancing keeps its expiry on the receiving shard."""

from __future__ import annotations

from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from shards import partitioner
from shards.messages import PrepareItem
from shards.shard import Shard
from tests.shards.catalog import ASKS, make_node, placement
from tests.shards.recount import shard_problems
from tests.shards.test_rebalancing import EXPIRED, NAMES, TTL


def test_a_moved_part_of_a_reservation_follows_its_expiry_on_the_receiving_shard() -> None:
    """Expiry runs per shard (on each prepare there), so a gang across two shards can be expired
    on one and still prepared on the other. When the other's node moves over, the part it brings
    must be released like the rest, not kept under a reservation that will never release it."""
    backend = InProcessTransport([Shard(0, reservation_ttl=TTL)])
    shard_set = ShardSet(backend)
    shard_set.resize(2)
    names = [n for n in NAMES if partitioner.owner(n, [0, 1]) == 1][:1] + [
        n for n in NAMES if partitioner.owner(n, [0, 1]) == 0
    ][:1]
    shard_set.apply(ClusterDeltas(nodes_upserted=tuple(make_node(n, "cpu") for n in names)))
    shard_set.flush()
    ask = ASKS[0]
    items = {shard_set.owner[n]: [PrepareItem("gang", (placement(f"default/{n}", ask, n, False),))] for n in names}
    assert all("gang" in reply.held for reply in shard_set.prepare(items, now=0.0).replies.values())
    shard_set.prepare({0: []}, now=TTL + 1)  # shard 0 expires its part; shard 1 has not looked yet
    shard_set.resize(1)  # shard 1's node moves onto shard 0
    (survivor,) = backend.shards.values()
    assert survivor.reservation_state("gang") == EXPIRED
    assert not shard_problems(survivor)
    assert not survivor.table.held.any()  # every node is empty again
