"""The coordinator: cluster model in, one scheduling cycle out, gangs committed across shards.

A cycle is one KAI session:

1. *Propose.* Every shard gets the cycle's distinct pending pod shapes in one call and
   answers with its best nodes for each, in the exact ranking a session uses, together
   with those nodes' current usage. The union is exact: a node outside every shard's top
   ``k`` can never be chosen while fewer than ``k`` pods are placed (docs/architecture.md#two-phase-reservation).
2. *Session.* Allocate runs on those candidate nodes; if eviction actions are configured
   and jobs are still pending, the session moves onto every node's rows and runs them.
3. *Prepare, commit or abort.* The pods each job binds now are reserved on every shard
   involved, all jobs in one call per shard; a job whose reservation is refused anywhere
   is aborted everywhere and left pending for the next cycle. Committed pods are assumed
   bound until the watch confirms them.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from coordinator.actions.registry import build_actions
from coordinator.cluster_model import ClusterModel
from coordinator.decisions import Decisions, PodDecision, collect
from coordinator.dra_session import ClaimGrant, DraView
from coordinator.job_timers import JobClock, remember_clocks
from coordinator.jobs import Job, Status, Task
from coordinator.search_backoff import SearchBackoff
from coordinator.session import SessionState, open_session, rebase_session
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement
from coordinator.topology import SessionDomains, wanted_topologies
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Pod
from shards.messages import Placement, PrepareItem, ProposeRequest
from shards.node_table import NodeTable
from shards.placement import Diagnosis, Placer
from shards.rows import NodeRows, merge_rows, table_from_rows
from shards.shapes import ResourceSchema, TaskShape

EVICTION_ACTIONS = ("consolidation", "reclaim", "preempt")
# Every reservation a cycle prepares is committed or aborted in the same cycle, and shards also
# expire old ones whenever they prepare; the explicit sweep is a safety net for reservations left
# by a crashed coordinator, so once in a while is enough (it costs a round trip to every shard).
EXPIRY_SWEEP_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class BindIntent:
    pod: str
    node: str
    gpu_groups: tuple[str, ...]
    reservation: str
    claims: tuple[ClaimGrant, ...] = ()  # DRA claims the bind allocates (written before binding)


@dataclass(frozen=True, slots=True)
class EvictIntent:
    pod: str
    action: str
    preemptor: str | None


@dataclass(slots=True)
class CycleStats:
    seconds: float = 0.0
    open_seconds: float = 0.0  # candidate nodes from the shards and the session's tables (KAI's open session)
    session_seconds: float = 0.0
    close_seconds: float = 0.0  # decisions collected, binds committed (KAI's close session)
    action_seconds: dict[str, float] = field(default_factory=dict)  # per action, in the order they ran
    candidate_nodes: int = 0
    full_table: bool = False
    commit_seconds: float = 0.0  # prepare + commit/abort across shards
    prepared_jobs: int = 0
    aborted_jobs: int = 0
    shard_calls: int = 0


@dataclass(slots=True)
class CycleResult:
    decisions: Decisions
    binds: list[BindIntent] = field(default_factory=list)
    evictions: list[EvictIntent] = field(default_factory=list)
    stats: CycleStats = field(default_factory=CycleStats)
    pod_queues: dict[str, str] = field(default_factory=dict)  # pod -> leaf queue, for pods of pod groups
    pod_jobs: dict[str, str] = field(default_factory=dict)  # each of our pods -> its pod group ('' if missing)
    not_ready_jobs: frozenset[str] = frozenset()  # gangs whose pods are not all created yet (never tried)
    search_skipped: dict[str, str] = field(default_factory=dict)  # job -> why no victim search ran for it
    paused_jobs: frozenset[str] = frozenset()  # jobs whose victim search waits out a backoff
    job_clocks: dict[str, JobClock] = field(default_factory=dict)  # pod groups whose timestamps changed


class Coordinator:
    def __init__(self, config: SchedulerConfig, shards: ShardSet, placer_type: type[Placer] = Placer) -> None:
        self.config = config
        self.shards = shards
        self.placer_type = placer_type
        self.model = ClusterModel()
        self.cycles = 0
        self.search_backoff = SearchBackoff(config.victimSearchBackoff)
        self._next_sweep = -float("inf")

    # ------------------------------------------------------------------ input
    def apply(self, deltas: ClusterDeltas) -> None:
        """Cluster changes, batched; shards get the node and pod changes they own."""
        routed = self.model.apply(deltas)
        self.shards.apply(routed, *self.model.dra.take_updates(set(self.model.nodes)))

    def bind_failed(self, pods: Sequence[str]) -> None:
        """The adapter could not bind these pods: they are pending again and their capacity returns."""
        pending = [p for key in pods if (p := self.model.forget_bind(key)) is not None]
        devices, holds = self.model.dra.take_updates(set(self.model.nodes))
        if pending or holds:
            self.shards.apply(ClusterDeltas(pods_upserted=tuple(pending)), devices, holds)

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """``apply`` then ``cycle``: one call where the coordinator is remote."""
        if deltas:
            self.apply(deltas)
        return self.cycle(now, actions)

    # ------------------------------------------------------------------ cycle
    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        started = time.perf_counter()
        calls_before = self.shards.calls
        self.cycles += 1
        if now >= self._next_sweep:
            self.shards.expire(now)
            self._next_sweep = now + EXPIRY_SWEEP_SECONDS
        names = tuple(self.config.effective_actions if actions is None else actions)
        snapshot = self.model.snapshot()
        stats = CycleStats()
        topologies = wanted_topologies(snapshot, self.config.schedulerName)
        if topologies:  # topology-constrained gangs choose among domains: they need every node's row
            table, diagnoses = self._full_table(), dict[TaskShape, Diagnosis]()
            stats.full_table = True
            stats.candidate_nodes = len(table)
        else:
            table, diagnoses = self._candidate_table(stats, DraView.of(snapshot.dra, ()) if snapshot.dra else None)
        state = open_session(snapshot, self.config, now, table, self.placer_type)
        state.remote_diagnoses = diagnoses
        if topologies:
            state.domains = SessionDomains.from_reports(topologies, self.shards.domains(topologies))
        state.search_paused = self.search_backoff.paused(now)
        state.search_reasons = self.search_backoff.reasons(state.search_paused)
        stmt = Statement(state.table, state.queues, state.jobs_by_task)
        session_started = time.perf_counter()
        stats.open_seconds = session_started - started
        for action in build_actions(names):
            action_started = time.perf_counter()
            if not stats.full_table and _needs_every_node(action.name, state):
                rebase_session(state, self._full_table())
                stmt = Statement(state.table, state.queues, state.jobs_by_task)
                stats.full_table = True
            action.execute(state, stmt)
            stmt.commit()
            stats.action_seconds[action.name] = time.perf_counter() - action_started
        closing = time.perf_counter()
        stats.session_seconds = closing - session_started
        decisions = collect(state, stmt.evictions)
        result = CycleResult(decisions, stats=stats)
        result.pod_queues = {key: job.queue for key, job in state.jobs_by_task.items()}
        result.pod_jobs = {key: job.key for key, job in state.jobs_by_task.items()}
        result.pod_jobs.update((key, "") for key in state.tasks if key not in state.jobs_by_task)
        result.not_ready_jobs = frozenset(k for k, j in state.jobs.items() if not j.ready_for_scheduling())
        result.search_skipped = dict(state.search_skipped)
        result.paused_jobs = state.search_paused
        commit_started = time.perf_counter()
        self._commit_binds(state, now, result)
        stats.commit_seconds = time.perf_counter() - commit_started
        # Only a pod placed before this session is there to evict. One that an action placed and a
        # later action evicted again in the same session is simply not bound; an eviction sent for
        # it would delete a pending pod (the API deletes unbound pods on eviction).
        result.evictions = [
            EvictIntent(pod, action, by)
            for pod, action, by in decisions.evictions
            if state.tasks[pod].original_status.active_used
        ]
        evicted = {state.jobs_by_task[e.pod].key for e in result.evictions if e.pod in state.jobs_by_task}
        result.job_clocks = remember_clocks(self.model.pod_groups, state.jobs.values(), state.last_start, evicted, now)
        self.search_backoff.record(
            now,
            state.search_failed,
            {k for k, j in state.jobs.items() if j.has_pending()},
            {key: _search_reasons(state.jobs[key]) for key in state.search_failed if key in state.jobs},
        )
        stats.shard_calls = self.shards.calls - calls_before
        stats.close_seconds = time.perf_counter() - closing
        stats.seconds = time.perf_counter() - started
        return result

    def _candidate_table(self, stats: CycleStats, dra: DraView | None) -> tuple[NodeTable, dict[TaskShape, Diagnosis]]:
        pending = [
            p
            for p in self.model.pods.values()
            if p.scheduler_name == self.config.schedulerName and p.state.value == "Pending"
        ]
        shapes = tuple(dict.fromkeys(_shape(p, dra) for p in pending))
        if not shapes:
            return NodeTable(ResourceSchema()), {}
        replies = self.shards.propose(ProposeRequest(shapes, max(len(pending), 1)))
        rows = merge_rows([r.rows for r in replies], _union_schema([r.rows for r in replies]))
        stats.candidate_nodes = len(rows)
        diagnoses: dict[TaskShape, Diagnosis] = {}
        for reply in replies:
            for shape, diagnosis in zip(shapes, reply.diagnoses, strict=True):
                known = diagnoses.get(shape)
                diagnoses[shape] = diagnosis if known is None else known.merged(diagnosis)
        return table_from_rows(rows), diagnoses

    def _full_table(self) -> NodeTable:
        parts = self.shards.rows()
        return table_from_rows(merge_rows(parts, _union_schema(parts)))

    # ------------------------------------------------------------------ commit
    def _commit_binds(self, state: SessionState, now: float, result: CycleResult) -> None:
        """Reserve each job's new binds on the shards involved; commit the jobs held everywhere."""
        by_job: dict[str, list[Task]] = defaultdict(list)
        for task in state.tasks.values():
            if task.status is Status.ALLOCATED and task.original_status is not Status.ALLOCATED:
                by_job[state.jobs_by_task[task.key].key].append(task)
        if not by_job:
            return
        items: dict[int, list[PrepareItem]] = defaultdict(list)
        rids: dict[str, str] = {}
        for job_key, tasks in by_job.items():
            rid = f"c{self.cycles}/{job_key}"
            rids[job_key] = rid
            per_shard: dict[int, list[Placement]] = defaultdict(list)
            for task in tasks:
                assert task.node is not None
                holding = task.holdings[-1]
                per_shard[self.shards.owner[task.node]].append(
                    Placement(
                        task.key,
                        task.node,
                        task.pod.requests,
                        False,
                        task.pod.gpu_share,
                        holding.shares,
                        holding.created_groups,
                        tuple((g.claim, tuple(r.key for r in g.allocation.results)) for g in task.claims),
                    )
                )
            for shard, placements in per_shard.items():
                items[shard].append(PrepareItem(rid, tuple(placements)))
        replies = self.shards.prepare(items, now)
        refused: dict[str, str] = {}
        for reply in replies.values():
            refused.update(reply.refused)
        committed = {job: rid for job, rid in rids.items() if rid not in refused}
        aborted = [rid for rid in rids.values() if rid in refused]
        placed = {t.key: t.node for job in committed for t in by_job[job] if t.node}
        self.shards.commit(list(committed.values()), placed)
        self.shards.abort(aborted)
        result.stats.prepared_jobs, result.stats.aborted_jobs = len(rids), len(aborted)
        for job_key, rid in rids.items():
            if job_key not in committed:
                self._retry_next_cycle(state, job_key, refused[rid], result)
                continue
            for task in by_job[job_key]:
                assert task.node is not None
                self.model.assume_bound(task.key, task.node, task.gpu_groups, task.claims)
                result.binds.append(BindIntent(task.key, task.node, task.gpu_groups, rid, task.claims))

    @staticmethod
    def _retry_next_cycle(state: SessionState, job_key: str, why: str, result: CycleResult) -> None:
        """A refused job is retried as a whole: the pods it was given in this session, pipelined
        ones included, are pending again (pipelined leftovers alone could be fewer than its gang)."""
        reason = f"capacity changed before the bind was committed ({why}); retried next cycle"
        for task in state.jobs[job_key].tasks:
            if task.status in (Status.ALLOCATED, Status.PIPELINED) and task.original_status is Status.PENDING:
                result.decisions.pods[task.key] = PodDecision("Pending", None, (), reason)
        result.decisions.pod_groups[job_key] = PodDecision("Pending", None, (), reason)


def _shape(pod: Pod, dra: DraView | None) -> TaskShape:
    if dra is None or not pod.resource_claims:
        return TaskShape.of_pod(pod)
    return TaskShape.of_pod(pod, dra.demand(pod))


def _search_reasons(job: Job) -> dict[str, str]:
    """What a job's victim searches said in this session (allocate's reason is recomputed every cycle)."""
    return {action: why for action, why in job.fit_errors.items() if action in EVICTION_ACTIONS}


def _needs_every_node(action: str, state: SessionState) -> bool:
    """Evicting actions look beyond the candidates, but only when they have something to do."""
    if action in EVICTION_ACTIONS:
        return any(t.status is Status.PENDING for t in state.tasks.values())
    if action == "stalegangeviction":
        return any(job.is_stale() for job in state.jobs.values())
    return False


def _union_schema(parts: Sequence[NodeRows]) -> ResourceSchema:
    names: set[str] = set()
    for part in parts:
        names.update(part.schema.scalars)
    return ResourceSchema(tuple(sorted(names)))
