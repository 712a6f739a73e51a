"""The core's data structures at scale, each against a baseline in the same run.

1. **Reservation book**: prepare + commit of 100 one-pod jobs on a shard that has already
   resolved 1,000,000 reservations, against the same on a fresh shard.
2. **Elastic job**: one job of 4,000 one-GPU pods and minMember 1 (what the pod grouper makes of
   a batch Job) on 5,000 nodes: the cycle that places it, against the per-pod full-scan
   baseline (``loadtests.baseline.FullScanCoordinator``).
3. **Idle cycle and steady arrivals**: 20,000 nodes, 16,000 running pods, a few gangs that fit
   nowhere, every action configured: a cycle with nothing new; cycles in which one more pod that
   fits nowhere arrives; cycles in which five one-GPU jobs arrive and are bound (the watch
   confirming the last cycle's binds). Against the baseline, which opens every session from
   scratch on every node's row; the binds must be the same.

    python -m loadtests.bench_core            # full sizes
    python -m loadtests.bench_core --quick    # smoke sizes
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import replace

from coordinator.coordinator import Coordinator
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Pod, PodGroup, PodState, ResourceVector
from loadtests.pod_workloads import GIB, KWOK, QUEUES
from loadtests.results import BenchRow, bench_main, compare, rss_bytes
from loadtests.systems import baseline, in_process
from shards.messages import Placement, PrepareItem, ShardDeltas
from shards.reservations import Reservation, ReservationState
from shards.shard import Shard

ALL_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
REPEATS = 7  # rounds of prepare + commit per shard (the median is reported)


def run(quick: bool) -> list[BenchRow]:
    rows = bench_reservations(resolved=100_000 if quick else 1_000_000)
    rows += bench_elastic(pods=1_000 if quick else 4_000, nodes=1_000 if quick else 5_000)
    rows += bench_idle(nodes=2_000 if quick else 20_000)
    return rows


# ---------------------------------------------------------------------- reservation book
def bench_reservations(resolved: int, jobs: int = 100) -> list[BenchRow]:
    workload = f"prepare + commit of {jobs} jobs after {resolved:,} resolved reservations"
    rows = []
    for system, shard in (
        ("baseline: the same on a fresh shard", _shard_with_history(0)),
        ("kai-ray: shard with the history", _shard_with_history(resolved)),
    ):
        # The median of a few rounds: a single one may take a garbage-collector pass over the
        # whole heap (tens of ms with a million objects alive), which is not the book's cost.
        times = [_timed_prepare_commit(shard, jobs, round_) for round_ in range(REPEATS)]
        median = statistics.median(times)
        rows.append(BenchRow(workload, system, jobs, median, times, rss_bytes()))
    compare(rows, rows[0])
    for row in rows:
        row.notes = f"median of {REPEATS}: {row.seconds * 1000:.2f} ms; slowest {max(row.latencies) * 1000:.2f} ms"
    return rows


def _shard_with_history(resolved: int) -> Shard:
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=tuple(model_nodes(100))))
    book = shard.book
    for i in range(resolved):  # what a long-running shard remembers: resolved reservations, oldest first
        reservation = Reservation(f"old-{i}", 0.0)
        book.add(reservation)
        book.resolve(reservation, ReservationState.COMMITTED if i % 10 else ReservationState.ABORTED)
    return shard


def _timed_prepare_commit(shard: Shard, jobs: int, round_: int = 0) -> float:
    requests = ResourceVector.of(cpu=100, memory=GIB, pods=1)
    nodes = shard.node_names()
    items = [
        PrepareItem(
            f"r{round_}-job-{i}", (Placement(f"bench/r{round_}-p-{i}", nodes[i % len(nodes)], requests, False),)
        )
        for i in range(jobs)
    ]
    started = time.perf_counter()
    reply = shard.prepare(items, now=1.0)
    answers = shard.commit([item.rid for item in items], now=1.0)
    elapsed = time.perf_counter() - started
    assert len(reply.held) == jobs and all(answers.values())
    return elapsed


# ---------------------------------------------------------------------- elastic job
def bench_elastic(pods: int, nodes: int) -> list[BenchRow]:
    workload = f"one elastic job of {pods:,} pods (minMember 1) on {nodes:,} nodes"
    cluster = ClusterDeltas(nodes_upserted=tuple(model_nodes(nodes, taint=True)), queues_upserted=QUEUES)
    group = PodGroup("bench", "elastic", "bench-team", 50, True, 1, created=0.0, uid="pg-elastic")
    job = ClusterDeltas(pod_groups_upserted=(group,), pods_upserted=tuple(_pods("elastic", pods)))
    rows, reference = [], None
    for name, make in (("baseline: per-pod full scan", baseline), ("kai-ray: in-process, 1 shard", in_process)):
        coordinator = make()
        coordinator.apply(cluster)
        coordinator.shards.flush()
        started = time.perf_counter()
        coordinator.apply(job)
        result = coordinator.cycle(1_000.0, ("allocate",))
        elapsed = time.perf_counter() - started
        placed = {b.pod: b.node for b in result.binds}
        row = BenchRow(workload, name, len(placed), elapsed, [elapsed], rss_bytes(), notes=f"{elapsed:.2f} s")
        if reference is None:
            reference = placed
        elif placed != reference:
            row.notes += "; DIFFERENT DECISIONS from the baseline"
        if len(placed) < pods:
            row.notes += f"; {pods - len(placed)} PODS NOT PLACED"
        rows.append(row)
    compare(rows, rows[0])
    return rows


def _pods(group: str, count: int, gpus: float = 1, state: PodState = PodState.PENDING) -> list[Pod]:
    return [
        Pod(
            "bench",
            f"{group}-{i:05d}",
            uid=f"uid-{group}-{i}",
            requests=ResourceVector.of(cpu=1_000, memory=4 * GIB, gpu=gpus, pods=1),
            tolerations=(KWOK,),
            created=float(i),
            pod_group=group,
            queue_label="bench-team",
            state=state,
        )
        for i in range(count)
    ]


# ---------------------------------------------------------------------- idle cycle
def bench_idle(nodes: int, cycles: int = 5) -> list[BenchRow]:
    """A cycle with nothing new, after the first cycles have searched for victims and backed off;
    then cycles in which one more pod that fits nowhere arrives (a change: a whole session)."""
    cluster = model_nodes(nodes, taint=True)
    gpu_nodes = [n.name for n in cluster if n.allocatable.gpu]
    running = [replace(_pods(f"run-{n}", 1)[0], state=PodState.RUNNING, node=n) for n in gpu_nodes]
    groups = [PodGroup("bench", f"run-{n}", "bench-team", 50, True, 1, uid=f"pg-{n}") for n in gpu_nodes]
    groups += [PodGroup("bench", f"stuck-{i}", "bench-team", 50, True, 4, created=1e6 + i) for i in range(5)]
    stuck_pods = [p for i in range(5) for p in _pods(f"stuck-{i}", 4, gpus=16)]  # no node has 16 GPUs
    deltas = ClusterDeltas(
        nodes_upserted=tuple(cluster),
        queues_upserted=QUEUES,
        pod_groups_upserted=tuple(groups),
        pods_upserted=tuple(running) + tuple(stuck_pods),
    )
    workload = f"idle cycle: {nodes:,} nodes, {len(running):,} running pods, 5 gangs that fit nowhere, all actions"
    rows = []
    binds: list[list[tuple[str, str]]] = []
    for name, make in (("baseline: every row each cycle", baseline), ("kai-ray: in-process, 1 shard", in_process)):
        coordinator: Coordinator = make(SchedulerConfig())
        coordinator.apply(deltas)
        now = 1_000.0
        stuck = {f"bench/stuck-{i}" for i in range(5)}
        while not stuck <= coordinator.search_backoff.paused(now):  # each search failed once, paused 10 s
            now += 1.0
            coordinator.cycle(now, ALL_ACTIONS)
        idle, changed = [], []
        for _ in range(cycles):  # within those 10 s nothing is due: nothing new at all
            now += 0.5
            idle.append(_timed_cycle(coordinator, now))
        for i in range(cycles):  # a cycle with one change: another pod that fits nowhere arrives
            coordinator.apply(ClusterDeltas(pods_upserted=tuple(_pods(f"late-{i}", 1, gpus=16))))
            now += 0.5
            changed.append(_timed_cycle(coordinator, now))
        arriving, bound = _steady_arrivals(coordinator, now, cycles)
        binds.append(bound)
        for label, times in (("nothing new", idle), ("one pending pod more", changed), (ARRIVALS, arriving)):
            median = statistics.median(times)
            notes = f"{label}: median {median * 1000:.1f} ms per cycle"
            rows.append(BenchRow(f"{workload}; {label}", name, 1, median, times, rss_bytes(), notes=notes))
    if binds[0] != binds[1]:
        rows[-1].notes += "; DIFFERENT BINDS from the baseline"
    for label in ("nothing new", "one pending pod more", ARRIVALS):
        pair = [r for r in rows if r.workload.endswith(label)]
        compare(pair, pair[0])
    return sorted(rows, key=lambda r: r.workload)


ARRIVALS = "five one-GPU jobs arrive per cycle"


def _steady_arrivals(coordinator: Coordinator, now: float, cycles: int) -> tuple[list[float], list[tuple[str, str]]]:
    """Cycles in which five one-GPU jobs arrive and are bound, the watch confirming the binds
    of the cycle before: times per cycle, and every bind."""
    times: list[float] = []
    binds: list[tuple[str, str]] = []
    confirmed: tuple[Pod, ...] = ()
    for i in range(cycles):
        group = f"arrival-{i}"
        groups = tuple(PodGroup("bench", f"{group}-{j}", "bench-team", 50, True, 1, created=2e6 + i) for j in range(5))
        pods = tuple(replace(_pods(f"{group}-{j}", 1)[0], uid=f"uid-{group}-{j}") for j in range(5))
        coordinator.apply(ClusterDeltas(pods_upserted=confirmed + pods, pod_groups_upserted=groups))
        now += 0.5
        started = time.perf_counter()
        result = coordinator.cycle(now, ALL_ACTIONS)
        times.append(time.perf_counter() - started)
        assert len(result.binds) == 5 and not result.evictions, "the arrivals must be bound"
        binds += sorted((b.pod, b.node) for b in result.binds)
        placed = {b.pod: b.node for b in result.binds}
        confirmed = tuple(
            replace(coordinator.model.pods[key], state=PodState.RUNNING, node=node) for key, node in placed.items()
        )
    return times, binds


def _timed_cycle(coordinator: Coordinator, now: float) -> float:
    started = time.perf_counter()
    result = coordinator.cycle(now, ALL_ACTIONS)
    elapsed = time.perf_counter() - started
    assert not result.binds and not result.evictions
    return elapsed


def main(argv: Sequence[str] | None = None) -> int:
    return bench_main(argv, __doc__, run)


if __name__ == "__main__":
    raise SystemExit(main())
