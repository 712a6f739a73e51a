"""How many round trips a cycle costs: the rounds the shards place in, where shapes could
interact and where they cannot, and the expiry sweep, which rides with the first batch."""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.coordinator import Coordinator
from coordinator.results import CycleResult
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, ShardDown
from shards.shard import Shard
from tests.builders import JobSpec, build, config, node, queue


def cycle(jobs: list[JobSpec]) -> CycleResult:
    snapshot = build([node("a"), node("b"), node("c")], [queue("q", gpu_quota=24)], jobs)
    coordinator = in_process_coordinator(config(actions=["allocate"]))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(0.0)


class Recording(InProcessTransport):
    """Every batch delivered, as the names of its requests."""

    def __init__(self, shards: list[Shard]) -> None:
        super().__init__(shards)
        self.batches: list[list[str]] = []

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        self.batches.extend([type(r).__name__ for r in b.requests] for b in batches.values())
        return super().exchange(batches)


def binds(result: CycleResult) -> dict[str, str]:
    return {b.pod: b.node for b in result.binds}


def test_a_whole_node_taken_by_one_pod_leaves_a_shape_that_packs_elsewhere_valid() -> None:
    # The 8-GPU pod fills b; the 1-GPU pods pack onto a, half full and better for them than an
    # empty b ever was. With b full they cannot use it, and with b empty they would not: the
    # stream placed for them in the first round stands, and no second round is needed.
    result = cycle(
        [
            JobSpec("running", "q", gpu=4, running_on=["a"]),
            JobSpec("whole", "q", gpu=8, created=1.0),
            JobSpec("small", "q", pods=2, gpu=1, created=2.0),
        ]
    )
    assert binds(result) == {"default/whole-0": "b", "default/small-0": "a", "default/small-1": "a"}
    assert result.stats.place_rounds == 1


def test_a_node_one_shape_half_filled_is_placed_again_for_the_other() -> None:
    # Two 4-GPU pods held on b: had only one been taken, b would be the 1-GPU pods' best node.
    # Their stream may be wrong, so they are placed again once they are needed.
    result = cycle(
        [
            JobSpec("running", "q", gpu=6, running_on=["a"]),
            JobSpec("halves", "q", pods=2, gpu=4, created=1.0),
            JobSpec("small", "q", pods=2, gpu=1, created=2.0),
        ]
    )
    assert binds(result) == {
        "default/halves-0": "b",
        "default/halves-1": "b",
        "default/small-0": "a",
        "default/small-1": "a",
    }
    assert result.stats.place_rounds == 2


def test_the_expiry_sweep_rides_with_the_first_batch_of_the_cycle() -> None:
    settings = config(actions=["allocate"])
    transport = Recording([Shard(0, PlacementPolicy.of(settings))])
    coordinator = Coordinator(settings, ShardSet(transport))
    snapshot = build([node("a")], [queue("q", gpu_quota=8)], [JobSpec("job", "q", gpu=1)])
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    result = coordinator.cycle(0.0)
    assert {b.pod: b.node for b in result.binds} == {"default/job-0": "a"}
    assert transport.batches == [["ApplyDeltas", "Expire", "Round"], ["Settle"]]
    assert result.stats.shard_calls == 2
