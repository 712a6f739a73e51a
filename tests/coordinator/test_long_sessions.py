"""A session that runs longer than the shards' reservation TTL still binds what it placed.

The shards hold what they place for a TTL, so that a coordinator that dies mid-cycle does not
keep capacity forever. A live coordinator renews the holds with every round; before, the TTL
ran from the cycle's first round, and a cycle slower than the TTL (a large backlog of mixed
shapes) had every bind refused, then ran the same way again, and never bound anything. A
settle renews nothing: one later than the TTL after the last round is still refused
(``test_shard_failures.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

import pytest

from coordinator import coordinator as coordinator_module
from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, ShardDown
from shards.shard import Shard
from tests.builders import JobSpec, build, config, node, queue

TTL = 5.0
STEP = 2.0  # seconds of the coordinator's clock that every exchange with the shards takes


class _SlowShards(InProcessTransport):
    """Every exchange with the shards moves the coordinator's clock on by ``STEP``."""

    def __init__(self, shards: list[Shard], clock: SimpleNamespace) -> None:
        super().__init__(shards)
        self.clock = clock
        self.exchanges = 0

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        self.clock.now += STEP
        self.exchanges += 1
        return super().exchange(batches)


def test_a_session_longer_than_the_reservation_ttl_binds_what_its_early_rounds_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(coordinator_module, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    # One node and jobs of two sizes taking turns: each size's stream changes the other's on the
    # node, so every job of the other size needs a new round.
    specs = [JobSpec(f"j{i}", "q", gpu=1 + i % 2) for i in range(4)]
    snapshot = build([node("a", gpu=8)], [queue("q", gpu_quota=8)], specs)
    cfg = config()
    transport = _SlowShards([Shard(0, PlacementPolicy.of(cfg), reservation_ttl=TTL)], clock)
    coordinator = Coordinator(cfg, ShardSet(transport))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    coordinator.shards.flush()
    before = transport.exchanges
    result = coordinator.cycle(1_000.0, ("allocate",))
    assert (transport.exchanges - before) * STEP > TTL  # the cycle outlived the first round's TTL
    assert sorted(b.pod for b in result.binds) == [f"default/j{i}-0" for i in range(4)]
    assert result.stats.aborted_jobs == 0
