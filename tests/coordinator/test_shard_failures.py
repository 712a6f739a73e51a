"""The two-phase commit and the shard set survive a shard dying at any point of a cycle."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import pytest

from coordinator.coordinator import Coordinator, ShardsFailed
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, Commit, Settle, ShardDown, ShardRequest, StaleEpoch
from shards.shard import Shard
from tests.builders import JobSpec, build, config, node, queue
from tests.coordinator import fault_trials

TRIALS = 200


def _survived(reports: list[fault_trials.TrialReport]) -> None:
    """Every trial's failure fired; nothing bound twice or in part, no node over-committed, no
    change lost, no bind in flight left unsent, and binding resumed within two cycles."""
    assert not [r for r in reports if "never fired" in r.phases]
    assert sum(len(r.bound_twice) for r in reports) == 0
    assert sum(len(r.partial_gangs) for r in reports) == 0
    assert sum(len(r.overcommitted) for r in reports) == 0
    assert sum(len(r.lost_deltas) for r in reports) == 0, [r.lost_deltas for r in reports if r.lost_deltas][:3]
    assert sum(len(r.never_sent) for r in reports) == 0, [r.never_sent for r in reports if r.never_sent][:3]
    resumed = [n for r in reports for n in r.resumed_after]
    assert len(resumed) == sum(len(r.failed_cycles) for r in reports), "binding always resumes"
    assert max(resumed) <= 2
    assert sum(r.binds for r in reports) > 0


def test_a_shard_killed_at_a_random_point_of_a_cycle_loses_nothing_and_binds_nothing_twice() -> None:
    reports = [fault_trials.in_process(seed) for seed in range(TRIALS)]
    assert [r for r in reports if r.failed_cycles], "every trial loses a shard in some cycle"
    _survived(reports)
    # The kills fell in every phase of a cycle, before and after a shard handled its batch.
    phases = Counter(p for r in reports for p in r.phases)
    assert {"place", "commit"} <= set(phases), phases


class _LateCommit(InProcessTransport):
    """Delivers the first commit to shard ``late`` after the hold's deadline, as a slow round would;
    the other shard commits in time."""

    def __init__(self, shards: list[Shard], delay: float, late: int) -> None:
        super().__init__(shards)
        self.delay = delay
        self.late = late
        self.delayed = 0

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        committing = any(isinstance(r, Commit | Settle) for b in batches.values() for r in b.requests)
        if self.delayed == 0 and committing and self.late in batches:
            self.delayed += 1
            b = batches[self.late]
            batches = {**batches, self.late: Batch(b.epoch, tuple(self._later(r) for r in b.requests))}
        return super().exchange(batches)

    def _later(self, request: ShardRequest) -> ShardRequest:
        if isinstance(request, Commit):
            return Commit(request.rids, request.now + self.delay)
        if isinstance(request, Settle):
            return Settle(replace(request.request, now=request.request.now + self.delay))
        return request


def test_a_reservation_that_expires_before_its_commit_binds_nothing_and_is_placed_next_cycle() -> None:
    snapshot = build(
        [node("a", gpu=4), node("e", gpu=4)],  # a on shard 1, e on shard 0
        [queue("q", gpu_quota=8)],
        [JobSpec("gang", "q", pods=6, gpu=1)],  # spans both nodes, so both halves must commit
    )
    cfg = config()
    shards = [Shard(i, PlacementPolicy.of(cfg), reservation_ttl=5.0) for i in range(2)]
    coordinator = Coordinator(cfg, ShardSet(_LateCommit(shards, delay=60.0, late=0)))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    first = coordinator.cycle(1_000.0, ("allocate",))
    assert first.binds == []
    assert "expired before the bind was committed" in first.decisions.pod_groups["default/gang"].reason
    assert first.stats.aborted_jobs == 1
    coordinator.shards.flush()  # the shard that committed in time hears of the release with its next round
    for shard in shards:  # the capacity went back everywhere, on the shard that committed in time too
        assert not shard.pods and not shard.book.prepared() and not shard.table.held.any()
    second = coordinator.cycle(1_001.0, ("allocate",))
    assert sorted(b.pod for b in second.binds) == [f"default/gang-{i}" for i in range(6)]


def test_reservation_ids_carry_the_epoch_and_a_newer_coordinator_voids_an_older_ones_reservations() -> None:
    snapshot = build([node("a", gpu=4)], [queue("q", gpu_quota=4)], [JobSpec("j", "q", gpu=1)])
    cfg = config()
    shard = Shard(0, PlacementPolicy.of(cfg))
    old = Coordinator(cfg, ShardSet(InProcessTransport([shard]), epoch=1))
    old.apply(ClusterDeltas.of_snapshot(snapshot))
    (bind,) = old.cycle(1_000.0, ("allocate",)).binds
    assert bind.reservation.startswith("e1c1/")
    new = Coordinator(cfg, ShardSet(InProcessTransport([shard]), epoch=2))
    new.apply(ClusterDeltas.of_snapshot(snapshot))
    new.shards.flush()
    assert shard.epoch == 2
    with pytest.raises(StaleEpoch):  # a shard serving a newer coordinator refuses the older one
        old.shards.describe()


def test_a_dead_shard_is_rebuilt_from_the_model_with_the_changes_it_never_acknowledged() -> None:
    """The change that adds a node is queued for a shard that then dies: the replacement has the node."""
    cfg = config()
    transport = fault_trials.FaultyTransport([Shard(i, PlacementPolicy.of(cfg)) for i in range(2)], None)
    coordinator = Coordinator(cfg, ShardSet(transport))
    coordinator.apply(ClusterDeltas(nodes_upserted=(node("a", gpu=1),), queues_upserted=(queue("q", gpu_quota=9),)))
    coordinator.shards.flush()
    big = node("big", gpu=8)
    owner = coordinator.shards.client.shard_ids()[0]
    coordinator.apply(ClusterDeltas(nodes_upserted=(big,)))
    home = coordinator.shards.owner["big"]
    transport.kill = fault_trials.Kill(round=transport.rounds + 1, shard=home, after_delivery=False)
    gang = build([big], [queue("q", gpu_quota=9)], [JobSpec("gang", "q", pods=9, gpu=1)])  # needs both nodes
    coordinator.apply(ClusterDeltas(pods_upserted=gang.pods, pod_groups_upserted=gang.pod_groups))
    with pytest.raises(ShardsFailed, match="went down"):
        coordinator.cycle(1_000.0, ("allocate",))
    assert owner in transport.shards and home in transport.shards
    assert "big" in transport.shards[home].node_names()
    second = coordinator.cycle(1_001.0, ("allocate",))
    assert len(second.binds) == 9 and {b.node for b in second.binds} == {"a", "big"}


def test_a_coordinator_killed_at_a_random_call_is_replaced_loses_nothing_and_binds_nothing_twice() -> None:
    reports = [fault_trials.coordinator_killed(seed) for seed in range(TRIALS)]
    _survived(reports)
    # The host died with a change as well as with a cycle, before and after running it.
    assert {"apply", "cycle"} <= {p for r in reports for p in r.phases}
