"""Shard placement cost, against a simple per-pod scheduler in the same run.

Two measurements, on the seeded busy cluster of ``loadtests.shard_workload``:

1. **one round**: one ``place_round`` that places and holds 1,000 pending pods of a mix of
   shapes on a 5,000-node shard (slot counts per node, one stream per shape), against placing
   the same pods one by one, in the same order, with a full scan of every node per pod. Both
   must put every pod on the same node.
2. **per-pod placement** at 1k / 5k / 20k / 50k nodes: pods placed one by one as a session
   does (``Placer.best_node`` through the per-shape ``ShapeIndex``, then the pod held on the
   table), against ``loadtests.baseline.FullScanPlacer``, which filters, scores and sorts every
   node for every pod. Both start from identical tables and must choose the same node, GPU
   groups and pipelining for every pod, or the run fails. Two batches run on the same tables:
   "cold" pays one index build (a full scan) per distinct pod shape, as a session's fresh
   placer does today; "warm" finds the indexes built.

Per-pod latencies feed the p99 column; notes give microseconds per pod. Constraint masks
are computed before timing for both systems (they are shared machinery); per-shape index
builds are part of the indexed system's time.

    python -m loadtests.bench_shards            # full: 1k/5k/20k/50k nodes
    python -m loadtests.bench_shards --quick    # smoke: small sizes
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from loadtests.baseline import FullScanPlacer
from loadtests.results import BenchRow, bench_main, compare, rss_bytes
from loadtests.shard_workload import PendingPod, busy_shard, pending_pods
from placement.holdings import Kind
from placement.node_table import NodeTable
from placement.placer import Choice, Placer
from placement.shapes import GPU, TaskShape
from shards.stream_messages import RoundRequest, ShapeStream, Taken
from shards.wire import pack_shapes


def run(quick: bool) -> list[BenchRow]:
    """Every row of both measurements (quick: small sizes, for a smoke run)."""
    rows = bench_round(nodes=1_000 if quick else 5_000, pods=200 if quick else 1_000)
    for nodes in (1_000, 5_000) if quick else (1_000, 5_000, 20_000, 50_000):
        rows += bench_placement(nodes, pods=200 if quick else 1_000)
    return rows


# ---------------------------------------------------------------------- one round
def bench_round(nodes: int, pods: int) -> list[BenchRow]:
    """One round places every pending pod, shape after shape, each shape's pods filled in with
    slot counts; the baseline places the same pods one by one, in the same order, scanning
    every node for each. Both must put every pod on the same node, pipelined alike."""
    batch = pending_pods(pods)
    counts = Counter(p.shape for p in batch)
    table = tuple(counts)
    workload = f"one round: {nodes:,} nodes / {pods:,} pods, {len(table)} shapes"
    shard = busy_shard(nodes)
    _warm_masks(shard.placer, table)
    for shape in table:
        shard.placer.index(shape)  # the shard keeps its indexes from cycle to cycle
    request = RoundRequest(
        "bench",
        0.0,
        Taken(pack_shapes(table), np.zeros(len(table), dtype=np.int64)),
        np.arange(len(table), dtype=np.int64),
        np.array([counts[s] for s in table], dtype=np.int64),
    )
    started = time.perf_counter()
    reply = shard.place_round(request)
    ours = BenchRow(workload, "kai-ray (one round of streams)", pods, time.perf_counter() - started, [], rss_bytes())
    placed = {shape: _expand(stream) for shape, stream in zip(table, reply.streams, strict=True)}

    scanned_shard = busy_shard(nodes)
    scanned = FullScanPlacer(scanned_shard.table, shard.placer.policy)
    _warm_masks(scanned, table)
    latencies = []
    for shape in table:
        sequence = []
        for i in range(counts[shape]):
            one = time.perf_counter()
            choice = scanned.best_node(shape)
            if choice is not None:
                hold_choice(scanned_shard.table, PendingPod(f"bench/scan-{i}", shape), choice)
                sequence.append((scanned_shard.table.names[choice.node], choice.pipelined))
            latencies.append(time.perf_counter() - one)
        if sequence != placed[shape]:
            raise AssertionError(f"{shape}: the round placed {placed[shape][:5]}..., the full scan {sequence[:5]}...")
    baseline = BenchRow(workload, "baseline (per-pod full scan)", pods, sum(latencies), latencies, rss_bytes())
    compare([ours, baseline], baseline)
    ours.notes = (
        f"{len(table)} shapes, {sum(len(s) for s in reply.streams)} entries; {_per_pod_us(ours, pods):.1f} µs/pod"
    )
    baseline.notes = f"{_per_pod_us(baseline, pods):.0f} µs/pod; same nodes for every pod"
    return [ours, baseline]


def _expand(stream: ShapeStream) -> list[tuple[str, bool]]:
    return [
        (str(name), bool(pipelined))
        for name, count, pipelined in zip(stream.names, stream.counts, stream.pipelined, strict=True)
        for _ in range(int(count))
    ]


# ---------------------------------------------------------------------- placement
def bench_placement(nodes: int, pods: int) -> list[BenchRow]:
    """Two batches on the same tables: the first (cold) pays one index build per pod shape, the
    second (warm) finds them built, as a placer that outlives one batch would."""
    indexed_shard, scanned_shard = busy_shard(nodes), busy_shard(nodes)
    indexed = indexed_shard.placer
    scanned = FullScanPlacer(scanned_shard.table, indexed.policy)
    rows = []
    for label, batch in (("cold", pending_pods(pods, seed=7)), ("warm", pending_pods(pods, seed=8, first=pods))):
        _warm_masks(indexed, [p.shape for p in batch])
        _warm_masks(scanned, [p.shape for p in batch])
        rows += _compare_batch(indexed, scanned, batch, f"placement: {nodes:,} nodes / {pods:,} pods ({label})")
    return rows


def _compare_batch(
    indexed: Placer, scanned: FullScanPlacer, batch: Sequence[PendingPod], workload: str
) -> list[BenchRow]:
    ours, our_choices = _place_one_by_one(indexed, batch, workload, "kai-ray (ShapeIndex per shape)")
    theirs, their_choices = _place_one_by_one(scanned, batch, workload, "baseline (per-pod full scan)")
    for pod, mine, other in zip(batch, our_choices, their_choices, strict=True):
        if mine != other:
            raise AssertionError(f"{pod.key}: the index chose {mine}, the full scan {other}")
    compare([ours, theirs], theirs)
    ours.notes = (
        f"{_per_pod_us(ours, len(batch)):.0f} µs/pod; {ours.pods} of {len(batch)} placed, same choices as baseline"
    )
    theirs.notes = f"{_per_pod_us(theirs, len(batch)):.0f} µs/pod"
    return [ours, theirs]


def _place_one_by_one(
    placer: Placer, batch: Sequence[PendingPod], workload: str, system: str
) -> tuple[BenchRow, list[Choice | None]]:
    """Best node for each pod in turn, held on the table before the next pod is placed."""
    table = placer.table
    choices: list[Choice | None] = []
    latencies = []
    for pod in batch:
        started = time.perf_counter()
        choice = placer.best_node(pod.shape)
        if choice is not None:
            hold_choice(table, pod, choice)
        latencies.append(time.perf_counter() - started)
        choices.append(choice)
    row = BenchRow(workload, system, sum(c is not None for c in choices), sum(latencies), latencies, rss_bytes())
    return row, choices


def hold_choice(table: NodeTable, pod: PendingPod, choice: Choice) -> None:
    """Hold ``pod`` where ``choice`` puts it, as a session's statement does."""
    vector = table.schema.vector(pod.shape.request)
    if pod.shape.share is not None:
        vector[GPU] = 0.0  # a fraction holds memory on shared GPUs, not whole devices
    kind = Kind.PIPELINED if choice.pipelined else Kind.ACTIVE
    table.hold(pod.key, choice.node, kind, vector, choice.shares, choice.create)


def _warm_masks(placer: Placer, shapes: Sequence[TaskShape]) -> None:
    for constraints in dict.fromkeys(shape.constraints for shape in shapes):
        placer.masks.admitted(constraints)


def _per_pod_us(row: BenchRow, pods: int) -> float:
    return row.seconds / pods * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    return bench_main(argv, __doc__, run)


if __name__ == "__main__":
    raise SystemExit(main())
