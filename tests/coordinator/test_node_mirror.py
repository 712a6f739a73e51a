"""The coordinator's mirror of every node row stays equal to the shards' rows while only the
changed rows cross over; and a cycle with nothing new decides exactly what a session would."""

from __future__ import annotations

import numpy as np

from coordinator.coordinator import Coordinator, CycleResult
from coordinator.node_mirror import NodeMirror
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Pod, PodState
from placement.node_table import NodeTable
from placement.placer import PlacementPolicy
from shards.shard import Shard
from tests.builders import GIB, JobSpec, build, config, node, queue
from tests.coordinator.fault_trials import FaultyTransport, Kill


def _rows(table: NodeTable) -> dict[str, tuple[object, ...]]:
    names = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
    out: dict[str, tuple[object, ...]] = {}
    for row in np.flatnonzero(table.present):
        held = {f"{k}/{c}": float(table.held[k, row, j]) for k in range(3) for j, c in enumerate(names)}
        alloc = {c: float(table.alloc[row, j]) for j, c in enumerate(names)}
        groups = {g: (u.active, u.releasing, u.pipelined, u.owns_slot) for g, u in table.groups[row].items()}
        out[table.names[row]] = (alloc, held, groups, dict(table.labels[row]), bool(table.ready[row]))
    return out


def _shards_rows(transport: InProcessTransport) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    for shard in transport.shards.values():
        out.update(_rows(shard.table))
    return out


def _running(name: str, node_name: str, gpu: float = 1) -> Pod:
    job = build([], [], [JobSpec(name, "q", gpu=gpu, running_on=[node_name])])
    return job.pods[0]


def test_the_mirror_follows_node_churn_pods_moves_between_shards_and_a_replaced_shard() -> None:
    cfg = config()
    transport = FaultyTransport([Shard(i, PlacementPolicy.of(cfg)) for i in range(2)], None)
    shards = ShardSet(transport)
    mirror = NodeMirror()
    shards.apply(ClusterDeltas(nodes_upserted=tuple(node(f"n{i}", gpu=4) for i in range(8))))
    mirror.sync(shards)
    assert _rows(mirror.table) == _shards_rows(transport) and mirror.rows_received == 8
    before = mirror.rows_received
    mirror.sync(shards)
    assert mirror.rows_received == before  # nothing changed: nothing crosses over
    shards.apply(ClusterDeltas(pods_upserted=(_running("a", "n1"), _running("b", "n5", 2))))
    shards.apply(ClusterDeltas(nodes_removed=("n3",), nodes_upserted=(node("n9", gpu=8, memory=64 * GIB),)))
    mirror.sync(shards)
    assert _rows(mirror.table) == _shards_rows(transport)
    assert mirror.rows_received - before == 3  # n1, n5 and the new n9; n3 only as a name
    shards.resize(3)  # nodes move to the new shard with their pods
    shards.apply(ClusterDeltas(nodes_upserted=(node("n1", gpu=4, labels={"zone": "b"}),)))
    mirror.sync(shards)
    assert _rows(mirror.table) == _shards_rows(transport)
    transport.kill = Kill(round=transport.rounds + 1, shard=0, after_delivery=False)
    shards.heartbeat()
    assert shards.down == {0}
    model_holder = Coordinator(cfg, shards)  # its model knows nothing: the replacement comes back empty
    shards.recover(model_holder.model)
    mirror.sync(shards)
    assert _rows(mirror.table) == _shards_rows(transport)


def _coordinator(memo: bool) -> Coordinator:
    class NoMemo(Coordinator):
        def _unchanged(self, now: float, names: tuple[str, ...]) -> CycleResult | None:
            return None

    cfg = config(defaultStalenessGracePeriod="30s")
    kind = Coordinator if memo else NoMemo
    return kind(cfg, ShardSet(InProcessTransport([Shard(0, PlacementPolicy.of(cfg))])))


def test_a_cycle_with_nothing_new_decides_what_a_session_would_until_a_timer_runs_out() -> None:
    snapshot = build(
        [node("a", gpu=4), node("b", gpu=4)],
        [queue("q", gpu_quota=8)],
        [
            JobSpec("big", "q", pods=3, gpu=8),  # fits nowhere: searched, then paused
            JobSpec("broken", "q", pods=3, min_member=3, running_on=["a"]),  # a gang below its minimum: stale
            JobSpec("fine", "q", pods=2, gpu=1, running_on=["b", "b"]),
        ],
    )
    with_memo, without = _coordinator(True), _coordinator(False)
    for coordinator in (with_memo, without):
        coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    reused = []
    for t in range(60):
        now = 1_000.0 + t
        ours, theirs = with_memo.cycle(now), without.cycle(now)
        reused.append(ours.stats.reused)
        assert ours.decisions == theirs.decisions, t
        assert [e.pod for e in ours.evictions] == [e.pod for e in theirs.evictions], t
        if ours.evictions:  # the stale gang's grace ran out: its pod is evicted, and leaves the cluster
            gone = ClusterDeltas(pods_removed=tuple(e.pod for e in ours.evictions))
            with_memo.apply(gone)
            without.apply(gone)
    assert sum(reused) > 40, "most of these cycles had nothing new"
    assert not all(reused[30:33]), "the stale gang's grace running out is noticed"
    assert any(p.state is PodState.RUNNING for p in with_memo.model.pods.values() if p.name.startswith("fine"))
