"""Shard scaling where the work per pod is node-heavy: the same workloads with the coordinator's
shards in process (1) and as Ray actors (1, 2 and 4), in one run.

Rows, each built by the benchmark that owns it:

- victim search (``loadtests.contention``): the reclaim storm (500 full 8-GPU nodes, 4,000
  reclaiming jobs) and the whole-node preempt storm (500 nodes of spread one-GPU jobs, 20
  8-GPU jobs); one session each;
- gangs with a required rack (``loadtests.bench_topology``): 1,000 gangs x 8 pods on 5,000
  nodes in 50 racks, 10 waves;
- DRA claims, some with CEL selectors (``loadtests.bench_dra``): 4,000 mixed pods on 50,000
  nodes, half of whose GPU nodes publish their devices, 10 waves.

The reference is the in-process row: every other system must make its decisions (pods, nodes,
evictions, devices; the digest in the notes is of those), or the row is flagged and the run
exits 1. ``vs baseline`` is against that in-process row.

CPU seconds, over the measured part of each row (from just after the cluster is loaded and sent
to the shards, to the end of the last measured cycle):

- coordinator: this process's CPU (``time.process_time``: the coordinator, and in process the
  shard too, whose share is taken out; on Ray also the pickling and Ray's own threads here);
- shards, reported: what each batch's ``handle`` spent on the shard's thread, summed
  (``BatchReply.cpu``, the figure every other benchmark reports);
- actor processes: user + system CPU of each shard actor's process (psutil on the pids the
  actors give), which also counts unpickling the batches, pickling the answers and Ray's threads.

    python -m loadtests.shard_scaling            # the sizes above
    python -m loadtests.shard_scaling --quick    # a smoke-sized run
    python -m loadtests.shard_scaling --nodes-factor 0.25   # every row on a quarter of the nodes
    python -m loadtests.shard_scaling --actors ''           # the in-process rows alone
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from coordinator.coordinator import Coordinator
from kai_ray.config import SchedulerConfig
from loadtests import bench_dra, bench_gangs, bench_topology, contention
from loadtests.gang_workload import GangWorkload
from loadtests.results import BenchRow, bench_main, compare_runs, fresh_heap
from loadtests.systems import in_process, on_ray

SHARD_ACTORS = (1, 2, 4)
CONFIG = SchedulerConfig()
W = TypeVar("W")  # a workload
D = TypeVar("D")  # the decisions a run of it made
Measuring = Callable[[], None]
Make = Callable[[], Coordinator]


@dataclass(frozen=True, slots=True)
class Sizes:
    contention_nodes: int
    reclaimers: int
    whole_node_jobs: int
    topology: dict[str, int]  # bench_topology's sizes: nodes, racks, gangs, waves
    dra: dict[str, int]  # bench_dra's: nodes, pods, waves

    def scaled(self, factor: float) -> Sizes:
        """The same rows on ``factor`` times the nodes (pods, jobs and racks unchanged)."""

        def nodes(count: int) -> int:
            return max(1, round(count * factor))

        return Sizes(
            nodes(self.contention_nodes),
            self.reclaimers,
            self.whole_node_jobs,
            {**self.topology, "nodes": nodes(self.topology["nodes"])},
            {**self.dra, "nodes": nodes(self.dra["nodes"])},
        )


FULL = Sizes(500, 4_000, 20, bench_topology.FULL, {**bench_dra.FULL, "nodes": 50_000})
QUICK = Sizes(50, 200, 2, bench_topology.QUICK, bench_dra.QUICK)


# ---------------------------------------------------------------------- CPU meters
def _actor_pid(_shard: object) -> int:
    """Run inside a shard actor (``__ray_call__``): its process id."""
    return os.getpid()


def actor_pids(coordinator: Coordinator) -> dict[int, int]:
    """Shard -> the pid of its actor's process; empty when the shards run in this process."""
    transport = coordinator.shards.transport
    if not transport.remote:
        return {}
    import ray

    handles: dict[int, Any] = getattr(transport, "handles")  # noqa: B009 - RayTransport's, not on the protocol
    return {sid: int(ray.get(handle.__ray_call__.remote(_actor_pid))) for sid, handle in sorted(handles.items())}


def process_cpu(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


@dataclass(slots=True)
class CpuMeter:
    """The CPU a measured part cost: this process's, the shards' reports, each actor process's."""

    coordinator: Coordinator
    pids: dict[int, int] = field(default_factory=dict)
    started: tuple[float, float, dict[int, float]] = (0.0, 0.0, {})

    def start(self) -> None:
        """The cluster goes to the shards and earlier garbage is collected before the meters start,
        so neither counts in the row."""
        self.coordinator.shards.flush()
        fresh_heap()
        self.pids = actor_pids(self.coordinator)
        actors = {sid: process_cpu(pid) for sid, pid in self.pids.items()}
        self.started = (time.process_time(), self.coordinator.shards.shard_cpu, actors)

    def stop(self, row: BenchRow) -> None:
        """Put the CPU seconds since ``start`` in ``row``: the coordinator's and the shards'
        reported figures as the other benchmarks do, each actor process's in the notes."""
        process_started, reported_started, actors_started = self.started
        process = time.process_time() - process_started
        row.shard_cpu = self.coordinator.shards.shard_cpu - reported_started
        remote = self.coordinator.shards.transport.remote
        row.coordinator_cpu = process if remote else process - row.shard_cpu
        actors = [process_cpu(pid) - actors_started[sid] for sid, pid in self.pids.items()]
        row.notes += f"; CPU s: coordinator {row.coordinator_cpu:.2f}, shards reported {row.shard_cpu:.2f}"
        if actors:
            row.notes += f", actor processes {' + '.join(f'{s:.2f}' for s in actors)} = {sum(actors):.2f}"


# ---------------------------------------------------------------------- decisions
def digest(decisions: object) -> str:
    """A short fingerprint of a run's decisions, the same for equal decisions in any order."""
    return hashlib.sha256(repr(_canonical(decisions)).encode()).hexdigest()[:12]


def _canonical(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canonical(v) for v in value)
    return value


def metered(
    drive: Callable[[str, Coordinator, W, Measuring], tuple[BenchRow, D]],
) -> Callable[[str, Coordinator, W], tuple[BenchRow, D]]:
    """``drive`` with the CPU meters started where it starts measuring, and its decisions' digest noted."""

    def run(system: str, coordinator: Coordinator, workload: W) -> tuple[BenchRow, D]:
        meter = CpuMeter(coordinator)
        row, decided = drive(system, coordinator, workload, meter.start)
        meter.stop(row)
        row.notes += f"; decisions {digest(decided)}"
        return row, decided

    return run


# ---------------------------------------------------------------------- the rows
def systems(in_process_1: Make, ray_actors: Callable[[int], Make], actors: Sequence[int]) -> list[tuple[str, Make]]:
    """In process with one shard (the reference), then each count of Ray shard actors."""
    out = [("kai-ray: in-process, 1 shard", in_process_1)]
    out += [(f"kai-ray: {n} Ray shard actor{'s' if n > 1 else ''}", ray_actors(n)) for n in actors]
    return out


def _ray(shards: int) -> Make:
    return lambda: on_ray(shards)


def contention_rows(sizes: Sizes, actors: Sequence[int]) -> list[BenchRow]:
    drive = metered(contention.drive)
    nodes = sizes.contention_nodes
    rows: list[BenchRow] = []
    for workload in (
        contention.reclaim_storm(nodes, sizes.reclaimers),
        contention.whole_node_preempt_storm(nodes, sizes.whole_node_jobs),
    ):
        rows += compare_runs(drive, workload, systems(in_process, _ray, actors))
    return rows


def _gang_drive(
    rack_of: dict[str, str],
) -> Callable[[str, Coordinator, GangWorkload, Measuring], tuple[BenchRow, dict[str, str]]]:
    """``bench_gangs.measure`` as a drive: the row, with gangs split over two racks counted, and the placements."""

    def drive(
        system: str, coordinator: Coordinator, workload: GangWorkload, measuring: Measuring
    ) -> tuple[BenchRow, dict[str, str]]:
        shards = cast(bench_gangs.TimedShardSet, coordinator.shards)  # every system here is built with one
        measured = bench_gangs.measure(system, coordinator, shards, workload, measuring)
        broken = bench_topology.violations(measured.run.placements, rack_of)
        measured.row.notes += f"; rack violations {broken}" + (" (CONSTRAINT VIOLATED)" if broken else "")
        return measured.row, measured.run.placements

    return drive


def _gangs_in_process() -> Coordinator:
    return bench_gangs.in_process(CONFIG, 1)[0]


def _gangs_on_ray(shards: int) -> Make:
    return lambda: bench_gangs.on_ray_actors(CONFIG, shards)[0]


def topology_rows(sizes: Sizes, actors: Sequence[int]) -> list[BenchRow]:
    workload, rack_of = bench_topology.topology_workload(**sizes.topology)
    drive = _gang_drive(rack_of)
    warm_up, warm_racks = bench_topology.topology_workload(nodes=20, racks=2, gangs=2, waves=1)
    _gang_drive(warm_racks)("warm-up", _gangs_in_process(), warm_up, fresh_heap)
    rows = compare_runs(metered(drive), workload, systems(_gangs_in_process, _gangs_on_ray, actors))
    label = f"required rack: {sizes.topology['nodes']:,} nodes in {sizes.topology['racks']} racks"
    for row in rows:
        row.workload = f"{label} / {workload.gangs:,} gangs x {workload.pods_per_gang}"
    return rows


def dra_rows(sizes: Sizes, actors: Sequence[int]) -> list[BenchRow]:
    load = bench_dra.workload(**sizes.dra)
    bench_dra.drive("warm-up", in_process(), bench_dra.workload(20, 20, 1))  # lazy imports, the CEL compile
    rows = compare_runs(metered(bench_dra.drive), load, systems(in_process, _ray, actors))
    for row in rows:
        row.workload = f"DRA with CEL selectors: {row.workload}"
    return rows


def run(sizes: Sizes, actors: Sequence[int] = SHARD_ACTORS) -> list[BenchRow]:
    """Every row; the victim-search rows first (they build in seconds), DRA's 50,000 nodes last."""
    contention.drive("warm-up", in_process(), contention.reclaim_storm(10, 20))
    return contention_rows(sizes, actors) + topology_rows(sizes, actors) + dra_rows(sizes, actors)


def main(argv: Sequence[str] | None = None) -> int:
    """``bench_main``'s command line (--quick, --json), --nodes-factor for the node-count slope and
    --actors for the Ray shard-actor counts (``--actors ''``: the in-process rows alone)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--nodes-factor", type=float, default=1.0)
    parser.add_argument("--actors", default=",".join(map(str, SHARD_ACTORS)))
    known, rest = parser.parse_known_args(argv)
    actors = tuple(int(n) for n in known.actors.split(",") if n.strip())
    return bench_main(rest, __doc__, lambda quick: run((QUICK if quick else FULL).scaled(known.nodes_factor), actors))


if __name__ == "__main__":
    raise SystemExit(main())
