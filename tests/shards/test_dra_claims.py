"""A shard's two-phase holds of DRA claims: a device goes to one reservation at a time, and a
committed claim stays until the API server releases it."""

from __future__ import annotations

from kai_ray.model import Node, ResourceVector
from shards.messages import Placement, PrepareItem, ShardDeltas
from shards.shard import Shard
from tests.placement.test_dra_devices import gpu


def shard_with_gpus(count: int) -> Shard:
    shard = Shard(0)
    node = Node("n", ResourceVector.of(cpu=8000, memory=2**34, pods=110))
    shard.apply(ShardDeltas(nodes_upserted=(node,), devices=(("n", tuple(gpu(i) for i in range(count))),)))
    return shard


def placement(pod: str, claim: str, *devices: int) -> Placement:
    keys = tuple(gpu(i).key for i in devices)
    return Placement(pod, "n", ResourceVector.of(cpu=100, pods=1), False, claims=((claim, keys),))


def test_two_reservations_for_one_device_the_second_is_refused_and_holds_nothing() -> None:
    shard = shard_with_gpus(2)
    reply = shard.prepare([PrepareItem("r1", (placement("ns/a", "ns/ca", 0),))], 1.0)
    assert reply.held == ("r1",)
    reply = shard.prepare([PrepareItem("r2", (placement("ns/b", "ns/cb", 1), placement("ns/c", "ns/cc", 0)))], 1.0)
    assert "r2" in reply.refused and "already allocated to claim ns/ca" in reply.refused["r2"]
    assert "ns/cb" not in shard.table.devices.claims  # the whole reservation let go of what it took
    shard.abort(["r1"])
    assert shard.table.devices.claims == {}


def test_committed_claims_stay_until_the_api_server_releases_them() -> None:
    shard = shard_with_gpus(1)
    shard.prepare([PrepareItem("r1", (placement("ns/a", "ns/ca", 0),))], 1.0)
    shard.commit(["r1"], 1.0)
    shard.expire(1_000_000.0)
    assert "ns/ca" in shard.table.devices.claims
    shard.apply(ShardDeltas(claims=(("ns/ca", "n", ()),)))
    assert shard.table.devices.claims == {}
