"""The benchmark suite: each workload run by kai-ray and by the baseline, in the same process.

The baseline is ``loadtests.baseline.FullScanCoordinator``: the same coordinator and the same
semantics, but every pod is filtered and scored against every node of the cluster, one pod at
a time, numpy-vectorized over the nodes (kube-scheduler without node sampling). It must make
exactly kai-ray's decisions; a row whose binds differ is flagged.

kai-ray runs in one process (one shard) and with its shards as Ray actors (the coordinator in
this process, so every propose / prepare / commit is a real actor round trip). All pods are
pending when the clock starts; a system runs allocate cycles until every pod is bound (or
nothing moves for three cycles). pods/s = pods bound / wall seconds from the pods' arrival to
the last bind; a pod's latency is the time from arrival until the cycle that bound it ended.
RSS is this process and its children, Ray's processes included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from coordinator.coordinator import Coordinator
from loadtests.pod_workloads import PodWorkload, kai_fill, scheduler_perf
from loadtests.results import BenchRow, compare_runs, fresh_heap, rss_bytes
from loadtests.systems import baseline, in_process, on_ray

ACTIONS = ("allocate",)  # every pod fits: eviction actions would find nothing to do
MAX_IDLE_CYCLES = 3
System = tuple[str, Callable[[], Coordinator]]


@dataclass(frozen=True, slots=True)
class Sizes:
    basic: tuple[int, int]  # nodes, pods
    large: tuple[int, int]
    fill: tuple[int, int]
    scaling: tuple[int, ...]  # shard actor counts
    ray_shards_basic: int


FULL = Sizes(
    basic=(5_000, 10_000),
    large=(50_000, 10_000),
    fill=(500, 4_000),
    scaling=(1, 2, 4, 8),
    ray_shards_basic=2,
)
QUICK = Sizes(basic=(1_000, 2_000), large=(5_000, 2_000), fill=(100, 800), scaling=(1, 2), ray_shards_basic=2)


def drive(system: str, coordinator: Coordinator, workload: PodWorkload) -> tuple[BenchRow, dict[str, str]]:
    """Load the cluster, then time the pending pods from arrival until the last bind."""
    loading = time.perf_counter()
    coordinator.apply(workload.cluster)
    coordinator.shards.flush()
    loaded = time.perf_counter() - loading
    fresh_heap()
    started = time.perf_counter()
    cpu_started, shard_cpu_started = time.process_time(), coordinator.shards.shard_cpu
    coordinator.apply(workload.pending)
    placed: dict[str, str] = {}
    latencies: list[float] = []
    now, idle, cycles = 1_000.0, 0, 0
    while len(placed) < workload.pods and idle < MAX_IDLE_CYCLES:
        now += 1.0
        result = coordinator.cycle(now, ACTIONS)
        cycles += 1
        done = time.perf_counter() - started
        for bind in result.binds:
            placed[bind.pod] = bind.node
        latencies.extend([done] * len(result.binds))
        idle = 0 if result.binds else idle + 1
    elapsed = time.perf_counter() - started
    row = BenchRow(workload.label, system, len(placed), elapsed, latencies, rss_bytes())
    cpu_split(row, coordinator, cpu_started, shard_cpu_started)
    row.notes = f"{cycles} cycles; {row.notes}; cluster loaded in {loaded:.1f} s (not timed)"
    if len(placed) < workload.pods:
        row.notes += f"; {workload.pods - len(placed)} PODS NOT PLACED"
    return row, placed


def cpu_split(row: BenchRow, coordinator: Coordinator, cpu_started: float, shard_cpu_started: float) -> None:
    """The CPU time of the measured part, split: what the shards report spending on their batches,
    and the coordinator's (this process's, less what in-process shards spent in it)."""
    shards = coordinator.shards.shard_cpu - shard_cpu_started
    process = time.process_time() - cpu_started
    row.shard_cpu = shards
    row.coordinator_cpu = process if coordinator.shards.transport.remote else process - shards
    pods = max(row.pods, 1)
    coordinator_us, shards_us = row.coordinator_cpu / pods * 1e6, row.shard_cpu / pods * 1e6
    row.notes = f"CPU per pod: coordinator {coordinator_us:.0f} µs, shards {shards_us:.0f} µs"


def compare_systems(workload: PodWorkload, systems: list[System]) -> list[BenchRow]:
    """The first system is the baseline: ratios are against it and decisions must equal its."""
    return compare_runs(drive, workload, systems)


def run(quick: bool) -> Iterator[list[BenchRow]]:
    """Each workload's rows as soon as they are measured."""
    sizes = QUICK if quick else FULL
    drive("warm-up", in_process(), scheduler_perf(20, 20))  # lazy imports stay out of the first row
    basic = scheduler_perf(*sizes.basic)
    yield compare_systems(
        basic,
        [
            ("baseline: per-pod full scan", baseline),
            ("kai-ray: in-process, 1 shard", in_process),
            ("kai-ray: in-process, 8 shards", lambda: in_process(shards=8)),
            (f"kai-ray: {sizes.ray_shards_basic} Ray shard actors", lambda: on_ray(sizes.ray_shards_basic)),
        ],
    )
    large = scheduler_perf(*sizes.large)
    yield compare_systems(
        large,
        [
            ("baseline: per-pod full scan", baseline),
            ("kai-ray: in-process, 1 shard", in_process),
            ("kai-ray: 1 Ray shard actor", lambda: on_ray(1)),
            ("kai-ray: 2 Ray shard actors", lambda: on_ray(2)),
        ],
    )
    del large
    fill = kai_fill(*sizes.fill)
    yield compare_systems(
        fill,
        [
            ("baseline: per-pod full scan", baseline),
            ("kai-ray: in-process, 1 shard", in_process),
            ("kai-ray: 2 Ray shard actors", lambda: on_ray(2)),
        ],
    )
    scaling: list[System] = [("baseline: per-pod full scan", baseline)]
    scaling += [
        (f"kai-ray: {n} Ray shard actor{'s' if n > 1 else ''}", lambda n=n: on_ray(n))  # type: ignore[misc]
        for n in sizes.scaling
    ]
    rows = compare_systems(basic, scaling)
    for row in rows:
        row.workload = "shard scaling: " + row.workload
    yield rows
    from loadtests import bench_core, bench_gangs, bench_topology, contention

    yield contention.run(quick)
    yield bench_gangs.run(quick)
    yield bench_topology.run(quick)
    yield bench_core.run(quick)
