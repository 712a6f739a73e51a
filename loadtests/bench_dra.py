"""Mixed shared-GPU / DRA workload: fractions, GPU-memory pods, ResourceClaims with and without
CEL selectors, claims shared by two pods, whole GPUs, on a cluster where half the GPU nodes
publish their GPUs through DRA ResourceSlices.

Pods arrive in waves, one allocate cycle per wave, on the synthetic node pools of
``kai_ray/app/sim/cluster.py`` (8 x 80 GiB, 4 x 40 GiB and CPU-only nodes), every second GPU node
a DRA node. Per wave, out of every ten pods: three fractions (0.25 / 0.5 GPU), one GPU-memory
pod (10 GiB), two pods each with its own claim for one GPU, one with a claim for two GPUs of at
least 60 GiB (a CEL selector on the device's memory), two sharing one claim (a gang of two),
one whole GPU from the device plugin.

Measured in the same run, on the same workload: the baseline (``FullScanCoordinator``, every
pod filtered and scored against every node, so every DRA node's devices are searched for every
claim pod) and kai-ray in one process with one and with four in-process shards. Every system
must bind the same pods to the same nodes, shared GPUs and devices as the baseline, or the row
is flagged.

    python -m loadtests.bench_dra            # 2,000 nodes, 4,000 pods, 10 waves
    python -m loadtests.bench_dra --quick    # a smoke-sized run
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.app.sim.dra import DRIVER, with_dra_nodes
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import (
    DeviceRequest,
    DraChanges,
    GpuShare,
    Pod,
    PodClaim,
    PodGroup,
    Queue,
    QueueResource,
    ResourceClaim,
    ResourceVector,
    Toleration,
)
from loadtests.baseline import FullScanCoordinator
from loadtests.results import BenchRow, bench_main, compare, rss_bytes
from placement.dra_cel import SELECTORS
from placement.placer import PlacementPolicy
from shards.shard import Shard

FULL = {"nodes": 2_000, "pods": 4_000, "waves": 10}
QUICK = {"nodes": 100, "pods": 200, "waves": 4}
ACTIONS = ("allocate",)
NS = "bench"
QUEUE = "q"
UNLIMITED = QueueResource(-1, 1, -1)
TOLERATE_KWOK = Toleration("kwok.x-k8s.io/node", "Exists", "", "NoSchedule")
BIG_GPU = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('60Gi')) >= 0"
Decision = tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]  # node, groups, claims


@dataclass(frozen=True)
class DraWorkload:
    label: str
    cluster: ClusterDeltas
    waves: tuple[ClusterDeltas, ...]
    pods: int


def workload(nodes: int, pods: int, waves: int) -> DraWorkload:
    listed, dra = with_dra_nodes(model_nodes(nodes, taint=True), 0.5)
    queue = Queue(QUEUE, None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED)
    cluster = ClusterDeltas(nodes_upserted=tuple(listed), queues_upserted=(queue,), dra=DraChanges.of_objects(dra))
    per_wave = pods // waves
    out = []
    for w in range(waves):
        made: list[Pod] = []
        groups: list[PodGroup] = []
        claims: list[ResourceClaim] = []
        for i in range(per_wave):
            name = f"w{w}-p{i}"
            kind = i % 10
            pod = Pod(
                NS,
                name,
                uid=name,
                requests=ResourceVector.of(cpu=500, memory=2**30, pods=1),
                tolerations=(TOLERATE_KWOK,),
                created=float(w),
                pod_group=name,
                queue_label=QUEUE,
            )
            if kind < 3:
                pod = _with(pod, gpu_share=GpuShare(fraction=0.25 if kind < 2 else 0.5))
            elif kind == 3:
                pod = _with(pod, gpu_share=GpuShare(memory_mib=10_240))
            elif kind in (4, 5, 6):
                count, selectors = (2, (BIG_GPU,)) if kind == 6 else (1, ())
                claims.append(_claim(f"{name}-gpu", count, selectors, owner=name))
                pod = _with(pod, resource_claims=(PodClaim("gpu", f"{name}-gpu"),))
            elif kind in (7, 8):
                shared = f"w{w}-shared-{i - kind + 7}"
                if kind == 7:
                    claims.append(_claim(shared, 1, (), owner=None))
                pod = _with(pod, pod_group=shared, resource_claims=(PodClaim("gpu", shared),))
            else:
                pod = _with(pod, requests=ResourceVector.of(cpu=500, memory=2**30, gpu=1, pods=1))
            made.append(pod)
            if pod.pod_group == name or kind == 7:
                size = 2 if kind == 7 else 1
                groups.append(PodGroup(NS, pod.pod_group or name, QUEUE, 50, True, size, created=float(w), uid=name))
        out.append(
            ClusterDeltas(
                pods_upserted=tuple(made),
                pod_groups_upserted=tuple(groups),
                dra=DraChanges(claims_upserted=tuple(claims)),
            )
        )
    label = f"{nodes:,} nodes ({len(dra.slices):,} DRA) / {per_wave * waves:,} mixed pods"
    return DraWorkload(label, cluster, tuple(out), per_wave * waves)


def _with(pod: Pod, **changes: object) -> Pod:
    from dataclasses import replace

    return replace(pod, **changes)  # type: ignore[arg-type]


def _claim(name: str, count: int, selectors: tuple[str, ...], owner: str | None) -> ResourceClaim:
    labels = () if owner else (("kai.scheduler/queue", QUEUE),)
    request = DeviceRequest("gpu", DRIVER, selectors, "ExactCount", count)
    return ResourceClaim(NS, name, f"uid-{name}", (request,), labels=labels, owner_pod=owner)


def drive(
    system: str, coordinator: Coordinator, load: DraWorkload, measuring: Callable[[], None] = lambda: None
) -> tuple[BenchRow, dict[str, Decision]]:
    """Load the cluster, then one timed cycle per wave; ``measuring`` is called between the two
    (a caller's meters start there)."""
    SELECTORS.forget()  # every system evaluates the CEL selectors from a cold cache
    coordinator.apply(load.cluster)
    measuring()
    decided: dict[str, Decision] = {}
    cycles: list[float] = []
    now = 1_000.0
    for wave in (*load.waves, None, None):
        started = time.perf_counter()
        if wave is not None:
            coordinator.apply(wave)
        now += 1
        result = coordinator.cycle(now, ACTIONS)
        cycles.append(time.perf_counter() - started)
        for bind in result.binds:
            grants = tuple((g.claim, tuple(r.key for r in g.allocation.results)) for g in bind.claims)
            decided[bind.pod] = (bind.node, bind.gpu_groups, grants)
    notes = f"{sum(1 for d in decided.values() if d[2])} claims allocated; {len(cycles)} cycles"
    if len(decided) < load.pods:
        notes += f"; {load.pods - len(decided)} PODS NOT PLACED"
    row = BenchRow(load.label, system, len(decided), sum(cycles), cycles, rss_bytes(), notes=notes)
    return row, decided


def in_process(shards: int, kind: type[Coordinator] = Coordinator) -> Coordinator:
    config = SchedulerConfig()
    backend = InProcessTransport([Shard(i, PlacementPolicy.of(config)) for i in range(shards)])
    return kind(config, ShardSet(backend))


def run(quick: bool) -> list[BenchRow]:
    sizes = QUICK if quick else FULL
    load = workload(sizes["nodes"], sizes["pods"], sizes["waves"])
    systems: list[tuple[str, Callable[[], Coordinator]]] = [
        ("baseline: per-pod full scan of every node, in-process", lambda: in_process(1, FullScanCoordinator)),
        ("kai-ray: in-process, 1 shard", lambda: in_process(1)),
        ("kai-ray: in-process, 4 shards", lambda: in_process(4)),
    ]
    warm = workload(20, 20, 1)  # lazy imports and the CEL compile stay out of the rows
    for _, make in systems[:2]:
        drive("warm-up", make(), warm)
    measured = [drive(name, make(), load) for name, make in systems]
    reference = measured[0][1]
    for row, decided in measured[1:]:
        if decided != reference:
            row.notes += "; DIFFERENT PLACEMENTS from the baseline"
    rows = [row for row, _ in measured]
    compare(rows, rows[0])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    return bench_main(argv, __doc__, run, footer="p99 ms = per cycle (one wave of pods)")


if __name__ == "__main__":
    raise SystemExit(main())
