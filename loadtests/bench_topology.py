"""Topology-constrained gangs: 1,000 gangs x 8 pods, each required to stay in one rack, on 5,000
8-GPU nodes in 50 racks.

Most nodes are partly used by another scheduler's pods (as in ``bench_gangs``), so a gang spans
several nodes of its rack; every gang names the rack level of a Topology as required, so each
session chooses among 50 rack domains per gang (bin-packing the fullest rack that holds it) from
the shards' merged domain reports. Gangs arrive in waves, one scheduling cycle per wave.

Measured, in the same run, on the same workload:
- baseline: ``loadtests.baseline.FullScanCoordinator``, the same coordinator whose sessions
  filter, score and sort every node of the cluster for every pod (the ratio column is against
  this row);
- kai-ray in process, 1 shard;
- kai-ray with its shards as 4 Ray actors (the rack domains are merged from 4 reports).
Every system must bind the same pods to the same nodes as the baseline; a gang whose pods are
in two racks counts as a constraint violation (the goal is 0).

    python -m loadtests.bench_topology            # 5,000 nodes, 50 racks, 1,000 gangs, 10 waves
    python -m loadtests.bench_topology --quick    # a smoke-sized run
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace

from coordinator.coordinator import Coordinator
from kai_ray.config import SchedulerConfig
from kai_ray.model import Topology, TopologyConstraint, TopologyLevel
from loadtests.baseline import FullScanCoordinator
from loadtests.bench_gangs import FOOTER, RAY_SHARDS, GangRow, TimedShardSet, in_process, measure, on_ray_actors
from loadtests.gang_workload import GangWorkload, gang_workload
from loadtests.results import BenchRow, bench_main, compare

FULL = {"nodes": 5_000, "racks": 50, "gangs": 1_000, "waves": 10}
QUICK = {"nodes": 250, "racks": 10, "gangs": 50, "waves": 5}
RACK_LABEL = "bench.kai-ray/rack"
TOPOLOGY = Topology("bench-topology", (TopologyLevel(RACK_LABEL, "rack"), TopologyLevel("kubernetes.io/hostname")))
REQUIRED_RACK = TopologyConstraint(TOPOLOGY.name, required="rack")


def topology_workload(nodes: int, racks: int, gangs: int, waves: int) -> tuple[GangWorkload, dict[str, str]]:
    """``bench_gangs``' workload with the nodes spread over ``racks`` racks (contiguous blocks of
    names) and every gang required to stay in one rack; also each node's rack."""
    base = gang_workload(nodes, gangs, waves)
    per_rack = -(-nodes // racks)
    rack_of: dict[str, str] = {}
    labelled = []
    for i, node in enumerate(base.cluster.nodes_upserted):
        rack = f"rack-{i // per_rack:03d}"
        rack_of[node.name] = rack
        labelled.append(replace(node, labels={**node.labels, RACK_LABEL: rack}))
    cluster = replace(base.cluster, nodes_upserted=tuple(labelled), topologies_upserted=(TOPOLOGY,))
    constrained = tuple(
        replace(wave, pod_groups_upserted=tuple(replace(g, topology=REQUIRED_RACK) for g in wave.pod_groups_upserted))
        for wave in base.waves
    )
    return replace(base, cluster=cluster, waves=constrained), rack_of


def violations(placements: dict[str, str], rack_of: dict[str, str]) -> int:
    """Gangs whose bound pods are in more than one rack (pods are named <gang>-<index>)."""
    racks: dict[str, set[str]] = defaultdict(set)
    for pod, node in placements.items():
        racks[pod.rsplit("-", 1)[0]].add(rack_of[node])
    return sum(1 for used in racks.values() if len(used) > 1)


def run(quick: bool) -> list[BenchRow]:
    sizes = QUICK if quick else FULL
    workload, rack_of = topology_workload(sizes["nodes"], sizes["racks"], sizes["gangs"], sizes["waves"])
    config = SchedulerConfig()
    systems: list[tuple[str, Callable[[], tuple[Coordinator, TimedShardSet]]]] = [
        ("baseline: per-pod full scan of every node, in-process", lambda: in_process(config, 1, FullScanCoordinator)),
        ("kai-ray: in-process, 1 shard", lambda: in_process(config, 1)),
        (f"kai-ray: coordinator in driver, {RAY_SHARDS} Ray shard actors", lambda: on_ray_actors(config, RAY_SHARDS)),
    ]
    warm_up, _ = topology_workload(nodes=20, racks=2, gangs=2, waves=1)
    for _, make in systems[:2]:
        measure("warm-up", *make(), warm_up)
    measured: list[GangRow] = [measure(name, *make(), workload) for name, make in systems]
    reference = measured[0].run.placements
    for gang_row in measured:
        gang_row.row.workload = (
            f"topology: {sizes['nodes']} nodes in {sizes['racks']} racks / {workload.gangs} gangs x 8, required rack"
        )
        broken = violations(gang_row.run.placements, rack_of)
        gang_row.row.notes += f"; rack violations {broken}" + (" (CONSTRAINT VIOLATED)" if broken else "")
        if gang_row is not measured[0] and gang_row.run.placements != reference:
            gang_row.row.notes += "; DIFFERENT PLACEMENTS from the baseline"
    rows = [m.row for m in measured]
    compare(rows, rows[0])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return bench_main(argv, __doc__, run, footer=FOOTER)


if __name__ == "__main__":
    raise SystemExit(main())
