"""Gang commit throughput: 1,000 gangs x 8 pods (1 GPU each, minMember 8) on 5,000 8-GPU nodes.

Most nodes are partly used by another scheduler's pods, so gangs span nodes and, with
several shards, span shards: every gang is prepared on each shard it touches and committed
everywhere or nowhere (docs/architecture.md#two-phase-reservation). Gangs arrive in waves,
one scheduling cycle per wave.

Measured, in the same run, on the same workload:
- baseline: ``loadtests.baseline.FullScanCoordinator``, the same coordinator whose sessions
  filter, score and sort every node of the cluster for every pod (the ratio column is
  against this row);
- kai-ray in process, 1 shard;
- kai-ray with the Coordinator in this process and its shards as 4 Ray actors (``RayTransport``),
  so every propose / prepare / commit is a real actor round trip.
Every system must bind the same pods to the same nodes as the baseline, or the run fails.

Reported per system: pods bound per second of cycle wall time; prepares and aborts per gang;
commit latency per cycle (prepare + commit of all the cycle's gangs is ONE batch per shard, so
every gang of a cycle shares it) and, per gang, the time from the start of the cycle that first
saw it until the commit that bound it returned; shard calls per cycle.

    python -m loadtests.bench_gangs            # 5,000 nodes, 1,000 gangs, 10 waves
    python -m loadtests.bench_gangs --quick    # a smoke-sized run
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from coordinator.coordinator import Coordinator, CycleResult
from coordinator.shard_client import Answers, InProcessTransport, ShardTransport
from coordinator.shard_set import ShardSet
from kai_ray.config import SchedulerConfig
from loadtests.baseline import FullScanCoordinator
from loadtests.gang_workload import GangWorkload, gang_workload
from loadtests.results import BenchRow, bench_main, compare, fresh_heap, rss_bytes
from placement.placer import PlacementPolicy
from shards.shard import Shard
from shards.stream_messages import SettleReply, SettleRequest

ACTIONS = ("allocate",)  # every gang fits: eviction actions would find nothing to do
FULL = {"nodes": 5_000, "gangs": 1_000, "waves": 10}
QUICK = {"nodes": 250, "gangs": 50, "waves": 5}
RAY_SHARDS = 4
MAX_EXTRA_CYCLES = 5  # after the last wave, for gangs whose commit was refused


class TimedShardSet(ShardSet):
    """Remembers when the last commit returned: the moment a cycle's gangs are bound."""

    def __init__(self, backend: ShardTransport) -> None:
        super().__init__(backend)
        self.commit_returned = 0.0

    def settle(
        self, commit: Mapping[int, Sequence[str]], abort: Mapping[int, Sequence[str]], now: float
    ) -> Answers[dict[str, bool]]:
        answers = super().settle(commit, abort, now)
        self.commit_returned = time.perf_counter()
        return answers

    def settle_all(self, requests: Mapping[int, SettleRequest]) -> Answers[SettleReply]:
        answers = super().settle_all(requests)
        self.commit_returned = time.perf_counter()
        return answers


@dataclass
class GangRun:
    """What one system did with the workload."""

    cycle_seconds: list[float] = field(default_factory=list)
    commit_seconds: list[float] = field(default_factory=list)
    shard_calls: list[int] = field(default_factory=list)
    gang_latency: dict[str, float] = field(default_factory=dict)  # gang -> seconds until bound
    binds_per_gang: Counter[str] = field(default_factory=Counter)
    placements: dict[str, str] = field(default_factory=dict)  # pod -> node it was bound to
    prepared: int = 0
    aborted: int = 0
    apply_seconds: float = 0.0
    cpu: float = 0.0  # this process's CPU seconds in the cycles
    shard_cpu: float = 0.0  # what the shards report for them


def drive(
    coordinator: Coordinator, shards: TimedShardSet, workload: GangWorkload, measuring: Callable[[], None] = fresh_heap
) -> GangRun:
    """Feed the cluster, then one cycle per wave of gangs (plus a few to retry refused commits);
    ``measuring`` is called between the two (it collects garbage, or also starts a caller's meters)."""
    run = GangRun()
    started = time.perf_counter()
    coordinator.apply(workload.cluster)
    run.apply_seconds += time.perf_counter() - started
    measuring()
    first_seen: dict[str, float] = {}
    now = 1_000.0
    waves = list(workload.waves) + [None] * MAX_EXTRA_CYCLES
    for wave in waves:
        if wave is None and len(run.gang_latency) == workload.gangs:
            break
        if wave is not None:
            started = time.perf_counter()
            coordinator.apply(wave)
            run.apply_seconds += time.perf_counter() - started
        now += 1.0
        cycle_started = time.perf_counter()
        if wave is not None:
            for group in wave.pod_groups_upserted:
                first_seen[group.key] = cycle_started
        cpu_started, shard_cpu_started = time.process_time(), shards.shard_cpu
        result = coordinator.cycle(now, ACTIONS)
        run.cycle_seconds.append(time.perf_counter() - cycle_started)
        run.cpu += time.process_time() - cpu_started
        run.shard_cpu += shards.shard_cpu - shard_cpu_started
        _record(run, result, shards.commit_returned, first_seen)
    return run


def _record(run: GangRun, result: CycleResult, committed_at: float, first_seen: dict[str, float]) -> None:
    stats = result.stats
    run.commit_seconds.append(stats.commit_seconds)
    run.shard_calls.append(stats.shard_calls)
    run.prepared += stats.prepared_jobs
    run.aborted += stats.aborted_jobs
    for bind in result.binds:
        gang = bind.reservation.split("/", 1)[1]  # reservation ids are "c<cycle>/<namespace>/<gang>"
        run.binds_per_gang[gang] += 1
        run.placements[bind.pod] = bind.node
        run.gang_latency.setdefault(gang, committed_at - first_seen[gang])


def measure(
    system: str,
    coordinator: Coordinator,
    shards: TimedShardSet,
    workload: GangWorkload,
    measuring: Callable[[], None] = fresh_heap,
) -> GangRow:
    run = drive(coordinator, shards, workload, measuring)
    cpu, shard_cpu = run.cpu, run.shard_cpu
    partial = sum(1 for n in run.binds_per_gang.values() if n != workload.pods_per_gang)
    unplaced = workload.gangs - len(run.gang_latency)
    commit_ms = np.percentile(run.commit_seconds, [50, 99]) * 1000
    gang_p50 = np.percentile(list(run.gang_latency.values()) or [0.0], 50) * 1000
    notes = (
        f"prepares/gang {run.prepared / workload.gangs:.2f}, aborts/gang {run.aborted / workload.gangs:.2f}; "
        f"commit/cycle p50 {commit_ms[0]:.1f} ms p99 {commit_ms[1]:.1f} ms (one batch per cycle); "
        f"gang bound after p50 {gang_p50:.1f} ms; "
        f"shard calls/cycle {np.mean(run.shard_calls):.1f}; {len(run.cycle_seconds)} cycles; "
        f"apply {run.apply_seconds:.2f} s"
    )
    if partial or unplaced:
        notes += f"; PARTIAL GANGS {partial}, UNPLACED GANGS {unplaced}"
    row = BenchRow(
        workload.label,
        system,
        pods=sum(run.binds_per_gang.values()),
        seconds=sum(run.cycle_seconds),
        latencies=list(run.gang_latency.values()),
        rss_bytes=rss_bytes(),
        notes=notes,
        coordinator_cpu=cpu if shards.transport.remote else cpu - shard_cpu,
        shard_cpu=shard_cpu,
    )
    return GangRow(row, run)


@dataclass
class GangRow:
    row: BenchRow
    run: GangRun


def in_process(
    config: SchedulerConfig,
    shards: int,
    kind: type[Coordinator] = Coordinator,
) -> tuple[Coordinator, TimedShardSet]:
    shard_set = TimedShardSet(InProcessTransport([Shard(i, PlacementPolicy.of(config)) for i in range(shards)]))
    return kind(config, shard_set), shard_set


def on_ray_actors(config: SchedulerConfig, shards: int) -> tuple[Coordinator, TimedShardSet]:
    from kai_ray.app.actors import RayTransport, ensure_ray

    ensure_ray(num_cpus=2)
    backend = RayTransport(shards, PlacementPolicy.of(config))
    backend.wait_ready()  # actors up before the clock
    shard_set = TimedShardSet(backend)
    return Coordinator(config, shard_set), shard_set


def run(quick: bool) -> list[BenchRow]:
    sizes = QUICK if quick else FULL
    workload = gang_workload(sizes["nodes"], sizes["gangs"], sizes["waves"])
    config = SchedulerConfig()
    systems: list[tuple[str, Callable[[], tuple[Coordinator, TimedShardSet]]]] = [
        ("baseline: per-pod full scan of every node, in-process", lambda: in_process(config, 1, FullScanCoordinator)),
        ("kai-ray: in-process, 1 shard", lambda: in_process(config, 1)),
        (f"kai-ray: coordinator in driver, {RAY_SHARDS} Ray shard actors", lambda: on_ray_actors(config, RAY_SHARDS)),
    ]
    warm_up = gang_workload(nodes=20, gangs=2, waves=1)  # first-use costs (lazy imports) stay out of the rows
    for _, make in systems[:2]:
        measure("warm-up", *make(), warm_up)
    measured = [measure(name, *make(), workload) for name, make in systems]
    reference = measured[0].run.placements
    for gang_row in measured[1:]:
        if gang_row.run.placements != reference:
            gang_row.row.notes += "; DIFFERENT PLACEMENTS from the baseline"
    rows = [m.row for m in measured]
    compare(rows, rows[0])
    return rows


FOOTER = "p99 ms = per gang: from the start of the cycle that first saw the gang until its commit returned"


def main(argv: Sequence[str] | None = None) -> int:
    return bench_main(argv, __doc__, run, footer=FOOTER)


if __name__ == "__main__":
    raise SystemExit(main())
