"""Contended workloads: queues competing for a full cluster, the situation KAI exists for.

- ``reclaim_storm``: 8-GPU nodes full of one-GPU preemptible jobs of ``team-a``; ``team-b``, owed
  half the cluster by quota, submits single-GPU jobs; one session of ``reclaim``. Up to half the
  cluster changes hands; the rest of team-b's jobs are refused (team-b would go above its share).
- ``preempt_storm``: the same full cluster; team-a submits higher-priority single-GPU jobs; one
  session of ``preempt``.
- ``whole_node_preempt_storm``: the same, with the running jobs spread over the nodes and the
  higher-priority jobs asking for a whole node each.
- ``mixed_backlog``: an empty cluster and two teams' backlogs of 1-, 2-, 4- and 8-GPU jobs, a
  fifth more than it holds, taking turns in the job order; one session of ``allocate``.

Each is one session, timed from the pending jobs' arrival to the end of the cycle that decided
them (the time ``kai-ray schedule`` spends deciding; reading the objects is not timed).
``python -m loadtests.contention [--quick]`` runs them against the full-scan baseline.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from coordinator.coordinator import Coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Pod, PodGroup, PodState, Queue, QueueResource, ResourceVector
from loadtests.pod_workloads import GIB, KWOK, NAMESPACE, eight_gpu_nodes
from loadtests.results import BenchRow, compare_runs, fresh_heap, rss_bytes, table
from loadtests.systems import baseline, in_process

UNLIMITED = QueueResource(quota=-1, over_quota_weight=1, limit=-1)
TRAIN, BUILD = 50, 100  # KAI's default priority classes: train is preemptible, build is not


@dataclass(frozen=True, slots=True)
class ContentionWorkload:
    label: str
    cluster: ClusterDeltas  # nodes, queues and the running jobs, loaded before the clock starts
    pending: ClusterDeltas  # the contending jobs, all pending
    actions: tuple[str, ...]
    contenders: int


def _job(
    name: str, queue: str, priority: int, index: int, node: str | None = None, priority_class: str = "train"
) -> tuple[PodGroup, Pod]:
    group = PodGroup(
        NAMESPACE,
        name,
        queue,
        priority,
        priority < BUILD,
        1,
        priority_class_name=priority_class,
        created=float(index),
        uid=f"pg-{name}",
    )
    pod = Pod(
        NAMESPACE,
        f"{name}-0",
        uid=f"pod-{name}",
        state=PodState.RUNNING if node else PodState.PENDING,
        node=node,
        requests=ResourceVector.of(cpu=1_000, memory=4 * GIB, gpu=1, pods=1),
        tolerations=(KWOK,),
        created=float(index),
        pod_group=name,
        queue_label=queue,
        priority_class_name=priority_class,
    )
    return group, pod


def _deltas(jobs: list[tuple[PodGroup, Pod]], **more: object) -> ClusterDeltas:
    return ClusterDeltas(
        pod_groups_upserted=tuple(g for g, _ in jobs),
        pods_upserted=tuple(p for _, p in jobs),
        **more,  # type: ignore[arg-type]
    )


def _full_cluster(nodes: int, queues: tuple[Queue, ...]) -> ClusterDeltas:
    """``nodes`` 8-GPU nodes, every GPU taken by a one-GPU preemptible job of team-a."""
    node_list = eight_gpu_nodes(nodes)
    running = [_job(f"a-{i:06d}", "team-a", TRAIN, i, node=node_list[i // 8].name) for i in range(len(node_list) * 8)]
    return _deltas(running, nodes_upserted=tuple(node_list), queues_upserted=queues)


def reclaim_storm(nodes: int = 500, jobs: int = 4_000) -> ContentionWorkload:
    half = QueueResource(quota=nodes * 4, over_quota_weight=1, limit=-1)
    queues = (
        Queue("teams", None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED),
        Queue("team-a", "teams", gpu=half, cpu=UNLIMITED, memory=UNLIMITED, created=1.0),
        Queue("team-b", "teams", gpu=half, cpu=UNLIMITED, memory=UNLIMITED, created=2.0),
    )
    pending = [_job(f"b-{i:06d}", "team-b", TRAIN, 100_000 + i) for i in range(jobs)]
    label = f"reclaim storm: {nodes:,} full 8-GPU nodes, {jobs:,} reclaiming jobs"
    return ContentionWorkload(label, _full_cluster(nodes, queues), _deltas(pending), ("reclaim",), jobs)


def preempt_storm(nodes: int = 500, jobs: int = 500) -> ContentionWorkload:
    queues = (
        Queue("teams", None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED),
        Queue("team-a", "teams", gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED, created=1.0),
    )
    pending = [_job(f"p-{i:06d}", "team-a", BUILD, 100_000 + i, priority_class="build") for i in range(jobs)]
    label = f"preempt storm: {nodes:,} full 8-GPU nodes, {jobs:,} higher-priority jobs"
    return ContentionWorkload(label, _full_cluster(nodes, queues), _deltas(pending), ("preempt",), jobs)


def whole_node_preempt_storm(nodes: int = 500, jobs: int = 20) -> ContentionWorkload:
    """The full cluster with team-a's one-GPU jobs dealt round-robin over the nodes (job i on node
    i mod n), and higher-priority jobs of one 8-GPU pod each: the jobs that go first in victim
    order sit on different nodes, so a search pops about seven victims per node before one node
    holds eight (a training job preempting a fleet of small inference pods)."""
    workload = preempt_storm(nodes, jobs)
    node_names = [n.name for n in workload.cluster.nodes_upserted]
    running = tuple(replace(pod, node=node_names[i % nodes]) for i, pod in enumerate(workload.cluster.pods_upserted))
    whole_node = ResourceVector.of(cpu=8_000, memory=32 * GIB, gpu=8, pods=1)
    pending = tuple(replace(pod, requests=whole_node) for pod in workload.pending.pods_upserted)
    label = f"preempt storm, whole nodes: {nodes:,} full 8-GPU nodes of spread one-GPU jobs, {jobs:,} 8-GPU jobs"
    return replace(
        workload,
        label=label,
        cluster=replace(workload.cluster, pods_upserted=running),
        pending=replace(workload.pending, pods_upserted=pending),
    )


def fragmented_consolidation(nodes: int = 500, gangs: int = 100) -> ContentionWorkload:
    """Every 8-GPU node half full of one-GPU preemptible jobs, so no node is free; pending
    8-GPU pods of the same queue can run only if consolidation packs the small jobs together."""
    queues = (
        Queue("teams", None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED),
        Queue("team-a", "teams", gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED, created=1.0),
    )
    node_list = eight_gpu_nodes(nodes)
    running = [_job(f"a-{i:06d}", "team-a", TRAIN, i, node=node_list[i // 4].name) for i in range(nodes * 4)]
    cluster = _deltas(running, nodes_upserted=tuple(node_list), queues_upserted=queues)
    pending = [_whole_node_job(f"w-{i:06d}", 100_000 + i) for i in range(gangs)]
    label = f"consolidation: {nodes:,} half-full 8-GPU nodes, {gangs:,} whole-node jobs"
    return ContentionWorkload(label, cluster, _deltas(pending), ("consolidation",), gangs)


def _whole_node_job(name: str, index: int) -> tuple[PodGroup, Pod]:
    group, pod = _job(name, "team-a", TRAIN, index)
    return group, replace(pod, requests=ResourceVector.of(cpu=8_000, memory=32 * GIB, gpu=8, pods=1))


def tree_fill(nodes: int = 500, jobs: int = 4_000) -> ContentionWorkload:
    """An empty cluster filled by jobs of 100 leaf queues in a 3-level tree (4 departments, 20
    teams, 100 projects) with GPU quotas, over-quota weights and limits: allocate must order
    every job by the queues' fair shares, which change with every placement."""
    gpus = nodes * 8
    queues = [Queue("root", None, gpu=UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED)]
    for d in range(4):
        queues.append(_queue(f"dept-{d}", "root", gpus // 4, -1, 1 + d, float(d)))
        for t in range(5):
            team = f"dept-{d}-team-{t}"
            queues.append(_queue(team, f"dept-{d}", gpus // 20, gpus // 10 if t == 0 else -1, 1, float(t)))
            for j in range(5):
                limit = max(1, gpus // 200) if j == 4 else -1  # a fifth of the projects stop at their quota
                queues.append(_queue(f"{team}-p{j}", team, gpus // 100 // 2, limit, 1 + j % 2, float(j)))
    leaves = [q.name for q in queues if q.name.count("-") == 4]
    pending = [_job(f"f-{i:06d}", leaves[(i * 37) % len(leaves)], TRAIN, 100_000 + i) for i in range(jobs)]
    cluster = ClusterDeltas(nodes_upserted=tuple(eight_gpu_nodes(nodes)), queues_upserted=tuple(queues))
    label = f"fill, 100 queues in 3 levels with quotas and limits: {nodes:,} 8-GPU nodes, {jobs:,} one-GPU jobs"
    return ContentionWorkload(label, cluster, _deltas(pending), ("allocate",), jobs)


MIXED_SIZES = (1, 1, 1, 1, 2, 2, 4, 8)  # GPUs per job, as the starved-gang simulation draws them


def mixed_backlog(nodes: int = 500, backlog: float = 1.2) -> ContentionWorkload:
    """Two teams owed half of an empty cluster each submit jobs of 1, 2, 4 and 8 GPUs, together a
    fifth more than it holds: the sizes share nodes and take turns in the job order."""
    gpus = nodes * 8
    queues = tuple(_queue(f"team-{t}", None, gpus // 2, -1, 1, float(k)) for k, t in enumerate("ab"))
    pending, asked, i = [], 0, 0
    while asked < gpus * backlog:
        size = MIXED_SIZES[(i * 5) % len(MIXED_SIZES)]
        group, pod = _job(f"m-{i:06d}", f"team-{'ab'[i % 2]}", TRAIN, 100_000 + i)
        requests = ResourceVector.of(cpu=500 * size, memory=GIB * size, gpu=size, pods=1)
        pending.append((group, replace(pod, requests=requests)))
        asked, i = asked + size, i + 1
    cluster = ClusterDeltas(nodes_upserted=tuple(eight_gpu_nodes(nodes)), queues_upserted=queues)
    label = f"fill, two teams, jobs of 1/2/4/8 GPUs: {nodes:,} empty 8-GPU nodes, {len(pending):,} jobs"
    return ContentionWorkload(label, cluster, _deltas(pending), ("allocate",), len(pending))


def _queue(name: str, parent: str | None, quota: int, limit: int, weight: int, created: float) -> Queue:
    gpu = QueueResource(quota=quota, over_quota_weight=weight, limit=limit)
    return Queue(name, parent, gpu=gpu, cpu=UNLIMITED, memory=UNLIMITED, created=created)


Outcome = tuple[dict[str, tuple[str, str | None]], list[tuple[str, str, str | None]]]


def drive(
    system: str, coordinator: Coordinator, workload: ContentionWorkload, measuring: Callable[[], None] = fresh_heap
) -> tuple[BenchRow, Outcome]:
    """Load the full cluster, then time one session over the contending jobs (``measuring`` is
    called just before the clock starts: it collects garbage, or also starts a caller's meters)."""
    coordinator.apply(workload.cluster)
    coordinator.shards.flush()
    coordinator.cycle(500.0, ("allocate",))  # the running jobs settle in; nothing pending yet
    measuring()
    started = time.perf_counter()
    cpu_started = time.process_time()
    coordinator.apply(workload.pending)
    result = coordinator.cycle(1_000.0, workload.actions)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    decided = {
        key: (decision.status, decision.node)
        for key, decision in result.decisions.pods.items()
        if decision.status != "Running"
    }
    evictions = sorted(result.decisions.evictions)
    contenders = {pod.key for pod in workload.pending.pods_upserted}
    placed = sum(1 for key in contenders if decided.get(key, ("", None))[0] in ("Pipelined", "Binding"))
    row = BenchRow(workload.label, system, placed, elapsed, [elapsed] * placed, rss_bytes())
    row.coordinator_cpu = cpu
    per_job = elapsed / workload.contenders * 1e3
    row.notes = (
        f"{placed:,} of {len(contenders):,} placed, {len(evictions):,} evicted; {per_job:.2f} ms per contending job"
    )
    return row, (decided, evictions)


System = tuple[str, Callable[[], Coordinator]]
SYSTEMS: list[System] = [("baseline: per-pod full scan", baseline), ("kai-ray: in-process, 1 shard", in_process)]


def compare_systems(workload: ContentionWorkload, systems: Sequence[System] = SYSTEMS) -> list[BenchRow]:
    """The first system is the baseline: ratios are against it, decisions must equal its."""
    return compare_runs(drive, workload, systems)


def run(quick: bool) -> list[BenchRow]:
    nodes = 100 if quick else 500
    rows = compare_systems(reclaim_storm(nodes, nodes * 8))
    # A few contended jobs on a cluster ten times the size: what each costs must not grow with
    # the nodes and running jobs it sits among.
    rows += compare_systems(reclaim_storm(nodes * 10, nodes * 2 // 5))
    rows += compare_systems(preempt_storm(nodes, nodes))
    rows += compare_systems(whole_node_preempt_storm(nodes, nodes // 25))
    rows += compare_systems(fragmented_consolidation(nodes, nodes // 5))
    rows += compare_systems(tree_fill(nodes, nodes * 8))
    rows += compare_systems(mixed_backlog(nodes))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 nodes instead of 500")
    args = parser.parse_args(argv)
    print(table(run(args.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
