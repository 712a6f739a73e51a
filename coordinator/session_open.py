"""Opening a session: a snapshot becomes node arrays, jobs, tasks and queue shares.

Mirrors KAI's session open: nodes and every pod that holds capacity go into the node
table; pods of this scheduler are grouped into jobs; queue requests and allocations
are rolled up the tree; the fair share is divided over the capacity left after other
schedulers' pods.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from coordinator.dra_session import DraView
from coordinator.job_timers import apply_timers
from coordinator.jobs import Job, PodSet, missing_group_note
from coordinator.min_runtime import MinRuntimes
from coordinator.session import SessionState, accepted_on
from coordinator.session_queues import empty_queue_state, queue_state_of
from coordinator.subgroups import build_tree, leaf_pod_sets, needs_tree
from coordinator.tasks import DEFAULT_SUBGROUP, PlacedHolds, Status, Task, task_status
from kai_ray.config import SchedulerConfig
from kai_ray.model import ClusterSnapshot, Pod, PodGroup, ResourceVector
from placement.holdings import Holding
from placement.node_table import NodeTable
from placement.placer import PlacementPolicy, Placer
from placement.pod_holds import pod_hold
from placement.shapes import ResourceSchema, TaskShape


def open_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    now: float,
    table: NodeTable | None = None,
    placer_type: type[Placer] = Placer,
    gated: Collection[Pod] = (),
) -> SessionState:
    """A session over ``table`` (rows that already carry their usage, e.g. from shards), or
    over a table built here from every node and placed pod of the snapshot. ``gated``: pods a
    scheduling gate holds out of the snapshot, whose demand counts in their queues' requests."""
    ours = [p for p in snapshot.pods if p.scheduler_name == config.schedulerName]
    vectors = [n.allocatable for n in snapshot.nodes] + [p.requests for p in snapshot.pods]
    built_here = table is None
    if table is None:
        table = NodeTable(ResourceSchema.covering(vectors), sorted(snapshot.nodes, key=lambda n: n.name))
    else:
        table.widen(grown_schema(table.schema, vectors))
    device_mib = {n.name: n.gpu_memory_mib for n in snapshot.nodes}
    dra = DraView.of(snapshot.dra, snapshot.nodes) if snapshot.dra else DraView()
    users = dra.users(snapshot.pods, lambda p: task_status(p).active_used) if dra else {}
    tasks: dict[str, Task] = {}
    shapes: dict[TaskShape, TaskShape] = {}  # one object per distinct shape: lookups by shape stay cheap
    placed = PlacedHolds()
    for pod in ours:
        status = task_status(pod)
        shape = TaskShape.of_pod(pod, dra.demand(pod)) if pod.resource_claims else TaskShape.of_pod(pod)
        shape = shapes.setdefault(shape, shape)
        task = Task(
            pod, shape, status, pod.node, pod.gpu_groups, original_status=status, original_node=pod.node, placed=placed
        )
        if pod.node is not None and status.active_used:
            gpu, cpu, memory = accepted_on(task, device_mib.get(pod.node, 100.0))
            task.accepted = (gpu + dra.charged_gpus(pod, users) if pod.resource_claims else gpu, cpu, memory)
        tasks[pod.key] = task
    state = SessionState(
        config=config,
        now=now,
        table=table,
        placer=make_placer(placer_type, table, config),
        queues=empty_queue_state(),
        jobs={},
        tasks=tasks,
        jobs_by_task={},
        all_pods={p.key: p for p in snapshot.pods},
        gpu_memory_kinds=tuple(sorted({n.gpu_memory_mib for n in snapshot.nodes})),
        placer_type=placer_type,
        placed_holds=placed,
        unusable_queues=snapshot.unusable_queues,
        topologies={t.name: t for t in snapshot.topologies},
        dra=dra,
    )
    table.devices.users = users
    table.devices.overrides = {}
    table.devices.releasing = {}
    table.devices.claim_gpus = {k: float(c.gpus) for k, c in dra.claims.items() if c.gpus}
    table.devices.payer = {k: min(v) for k, v in users.items() if v and k in dra.claims and dra.claims[k].allocation}
    attach_placed_pods(state, snapshot.pods, apply=built_here)
    _build_jobs(state, snapshot.pod_groups, ours)
    for task in tasks.values():
        problem = state.claim_problem(task) if task.status is Status.PENDING else None
        if problem:
            state.pod_notes.setdefault(task.key, problem)
    state.queues = queue_state_of(state, snapshot, gated)
    state.min_runtimes = MinRuntimes.of(
        snapshot.queues, config.defaultPreemptMinRuntime, config.defaultReclaimMinRuntime, config.reclaimResolveMethod
    )
    apply_timers(state.jobs, state.last_start, config, now)
    return state


def make_placer(placer_type: type[Placer], table: NodeTable, config: SchedulerConfig) -> Placer:
    return placer_type(table, PlacementPolicy.of(config))


def grown_schema(schema: ResourceSchema, vectors: list[ResourceVector]) -> ResourceSchema:
    """``schema`` with the scalar resources of ``vectors`` it lacks (the same object if none)."""
    names = set(schema.scalars) | {n for v in vectors for n in v.scalars}
    return schema if len(names) == len(schema.scalars) else ResourceSchema(tuple(sorted(names)))


def attach_placed_pods(state: SessionState, pods: Iterable[Pod], apply: bool) -> None:
    """Record what placed pods hold; ``apply`` also adds it to the table (when the table was
    built from the snapshot rather than handed over with usage already in it)."""
    table = state.table
    for pod in pods:
        hold = pod_hold(table, pod)
        if hold is None:
            if pod.node is not None and pod.node not in table.index and apply and task_status(pod).active_used:
                state.pod_notes.setdefault(pod.key, f"its node {pod.node} is not in the cluster")
            continue
        if apply:
            holding = table.hold(pod.key, hold.row, hold.kind, hold.vector, hold.shares)
        else:
            holding = Holding(pod.key, hold.row, hold.kind, hold.vector, hold.shares)
        task = state.tasks.get(pod.key)
        if task is not None:
            task.holdings.append(holding)
            task.gpu_groups = tuple(g for g, _ in hold.shares)


def _build_jobs(state: SessionState, groups: Iterable[PodGroup], ours: list[Pod]) -> None:
    members: dict[str, list[Task]] = {}
    for pod in ours:
        if pod.pod_group:
            members.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(state.tasks[pod.key])
    known = set()
    for group in groups:
        known.add(group.key)
        tasks = members.get(group.key, [])
        if needs_tree(group):
            _build_tree_job(state, group, tasks)
            continue
        if group.sub_groups:
            pod_sets = {s.name: PodSet(s.name, s.min_member, tracked=True) for s in group.sub_groups}
        else:
            pod_sets = {DEFAULT_SUBGROUP: PodSet(DEFAULT_SUBGROUP, max(group.min_member, 1), tracked=True)}
        for task in tasks:
            name = task.subgroup if task.subgroup in pod_sets else DEFAULT_SUBGROUP
            pod_sets.setdefault(name, PodSet(name, 0, tracked=True)).add(task)
        job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
        state.jobs[group.key] = job
        for task in tasks:
            state.jobs_by_task[task.key] = job
        if group.last_start is not None:
            state.last_start[group.key] = group.last_start
    for key, tasks in members.items():
        if key not in known:
            for task in tasks:
                state.pod_notes[task.key] = missing_group_note(key, task.pod)


def _build_tree_job(state: SessionState, group: PodGroup, tasks: list[Task]) -> None:
    """A job with a sub-group tree or topology constraints (coordinator/subgroups.py); pods that
    name no leaf of it wait with KAI's reason."""
    pod_sets, invalid = leaf_pod_sets(group, tasks)
    job = Job(group, group.queue, pod_sets, group.preemptible, group.priority, stale_since=group.stale_since)
    job.tree = build_tree(group, pod_sets)
    state.jobs[group.key] = job
    for task in tasks:
        if task.key in invalid:
            state.pod_notes[task.key] = invalid[task.key]
        else:
            state.jobs_by_task[task.key] = job
    if group.last_start is not None:
        state.last_start[group.key] = group.last_start
