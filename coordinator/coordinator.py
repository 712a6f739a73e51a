"""The coordinator: cluster model in, one scheduling cycle out, gangs committed across shards.

A cycle is one KAI session:

1. *Propose.* Every shard gets the cycle's distinct pending pod shapes in one call and
   answers with its best nodes for each, in the exact ranking a session uses, together
   with those nodes' current usage. The union is exact: a node outside every shard's top
   ``k`` can never be chosen while fewer than ``k`` pods are placed (see DESIGN.md §3).
2. *Session.* Allocate runs on those candidate nodes; if eviction actions are configured
   and jobs are still pending, the session moves onto every node's rows and runs them.
3. *Prepare, then commit and abort.* The pods each job binds now are reserved on every
   shard involved, all jobs in one call per shard; then, in one more round, the jobs held
   everywhere are committed and the others aborted. A job is bound only when every shard
   it touches committed it (a commit past the reservation's deadline is refused); a job
   refused anywhere is left pending for the next cycle. Committed pods are assumed bound
   until the watch confirms them.

A shard that does not answer fails the cycle (``ShardsFailed``): nothing of it is bound, the
live shards drop what the cycle reserved, and the dead shard is replaced by a fresh one
loaded from the coordinator's model before the error is raised, so the next cycle schedules.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from coordinator.actions.registry import build_actions
from coordinator.cluster_model import ClusterModel
from coordinator.decisions import Decisions, PodDecision, collect
from coordinator.jobs import Status, Task
from coordinator.node_mirror import NodeMirror
from coordinator.search_backoff import SearchBackoff
from coordinator.session import SessionState, open_session, rebase_session
from coordinator.shard_client import Answers
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from shards.messages import Placement, PrepareItem, ProposeRequest
from shards.node_table import NodeTable
from shards.placement import Diagnosis, Placer
from shards.protocol import ShardInfo
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


@dataclass(frozen=True, slots=True)
class EvictIntent:
    pod: str
    action: str
    preemptor: str | None


@dataclass(slots=True)
class CycleStats:
    seconds: float = 0.0
    session_seconds: float = 0.0
    candidate_nodes: int = 0
    full_table: bool = False
    commit_seconds: float = 0.0  # prepare + commit/abort across shards
    prepared_jobs: int = 0
    aborted_jobs: int = 0
    shard_calls: int = 0
    reused: bool = False  # nothing had changed: the last cycle's decisions, no session run


@dataclass(slots=True)
class CycleResult:
    decisions: Decisions
    binds: list[BindIntent] = field(default_factory=list)
    evictions: list[EvictIntent] = field(default_factory=list)
    stats: CycleStats = field(default_factory=CycleStats)
    pod_queues: dict[str, str] = field(default_factory=dict)  # pod -> leaf queue, for pods of pod groups


class ShardsFailed(RuntimeError):
    """Shards went down during a cycle. They were replaced and rebuilt from the model, and every
    reservation of the cycle was undone: nothing of it is bound. The next cycle schedules again."""

    def __init__(self, message: str, shards: frozenset[int], phase: str) -> None:
        super().__init__(message)
        self.shards = shards
        self.phase = phase


class Coordinator:
    def __init__(self, config: SchedulerConfig, shards: ShardSet, placer_type: type[Placer] = Placer) -> None:
        self.config = config
        self.shards = shards
        self.placer_type = placer_type
        self.model = ClusterModel()
        self.cycles = 0
        self.search_backoff = SearchBackoff(config.victimSearchBackoff)
        self._next_sweep = -float("inf")
        self.recovered: list[tuple[int, int]] = []  # (cycle, shard) for every shard rebuilt
        self._memo: _Memo | None = None
        self.mirror = NodeMirror()

    @property
    def epoch(self) -> int:
        return self.shards.epoch

    # ------------------------------------------------------------------ input
    def apply(self, deltas: ClusterDeltas) -> None:
        """Cluster changes, batched; shards get the node and pod changes they own."""
        self.shards.apply(self.model.apply(deltas))

    def bind_failed(self, pods: Sequence[str]) -> None:
        """The adapter could not bind these pods: they are pending again and their capacity returns."""
        pending = [p for key in pods if (p := self.model.forget_bind(key)) is not None]
        if pending:
            self.shards.apply(ClusterDeltas(pods_upserted=tuple(pending)))

    def step(self, deltas: ClusterDeltas, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        """``apply`` then ``cycle``: one call where the coordinator is remote."""
        if deltas:
            self.apply(deltas)
        return self.cycle(now, actions)

    def shard_info(self) -> list[ShardInfo]:
        answers = self.shards.describe()
        return [answers.replies[sid] for sid in sorted(answers.replies)]

    # ------------------------------------------------------------------ cycle
    def cycle(self, now: float, actions: Sequence[str] | None = None) -> CycleResult:
        started = time.perf_counter()
        calls_before = self.shards.calls
        self.cycles += 1
        self._recover()
        names = tuple(self.config.effective_actions if actions is None else actions)
        try:
            result = self._unchanged(now, names) or self._run_cycle(now, names, started)
        except _ShardLost as lost:
            self._recover()
            raise ShardsFailed(
                f"shard {', '.join(map(str, sorted(lost.shards)))} went down during cycle {self.cycles} "
                f"({lost.phase}); rebuilt from the cluster model, nothing of this cycle is bound",
                lost.shards,
                lost.phase,
            ) from None
        result.stats.shard_calls = self.shards.calls - calls_before
        result.stats.seconds = time.perf_counter() - started
        return result

    def _recover(self) -> None:
        if self.shards.down:
            for sid in self.shards.recover(self.model):
                self.recovered.append((self.cycles, sid))

    def _unchanged(self, now: float, names: tuple[str, ...]) -> CycleResult | None:
        """The last result again when nothing it depends on has changed: the same cluster (model
        version), the same actions, the same paused victim searches, and no time-driven rule due
        yet (a pause ending, a stale gang's grace running out, a victim's minimum runtime). A
        session would decide exactly the same, so it is not run; the shards still hear from us."""
        memo = self._memo
        if memo is None or memo.key != (self.model.version, names, self.search_backoff.paused(now)):
            return None
        if now >= memo.until:
            return None
        self._sweep(now)
        _check(self.shards.heartbeat(), "heartbeat")
        decisions = memo.result.decisions
        return CycleResult(decisions, [], list(memo.result.evictions), CycleStats(reused=True), memo.result.pod_queues)

    def _sweep(self, now: float) -> None:
        if now >= self._next_sweep:
            _check(self.shards.expire(now), "expiry sweep")
            self._next_sweep = now + EXPIRY_SWEEP_SECONDS

    def _run_cycle(self, now: float, names: tuple[str, ...], started: float) -> CycleResult:
        self._memo = None
        version, paused = self.model.version, self.search_backoff.paused(now)
        self._sweep(now)
        snapshot = self.model.snapshot()
        stats = CycleStats()
        table, diagnoses = self._candidate_table(stats)
        state = open_session(snapshot, self.config, now, table, self.placer_type)
        state.remote_diagnoses = diagnoses
        state.search_paused = self.search_backoff.paused(now)
        stmt = Statement(state.table, state.queues, state.jobs_by_task)
        session_started = time.perf_counter()
        for action in build_actions(names):
            if not stats.full_table and _needs_every_node(action.name, state):
                rebase_session(state, self._full_table())
                stmt = Statement(state.table, state.queues, state.jobs_by_task)
                stats.full_table = True
            action.execute(state, stmt)
            stmt.commit()
        stats.session_seconds = time.perf_counter() - session_started
        decisions = collect(state, stmt.evictions)
        result = CycleResult(decisions, stats=stats)
        result.pod_queues = {key: job.queue for key, job in state.jobs_by_task.items()}
        commit_started = time.perf_counter()
        self._commit_binds(state, now + (commit_started - started), result)
        stats.commit_seconds = time.perf_counter() - commit_started
        result.evictions = [EvictIntent(pod, action, by) for pod, action, by in decisions.evictions]
        self._remember_job_clock(state)
        self.search_backoff.record(now, state.search_failed, {k for k, j in state.jobs.items() if j.has_pending()})
        if self.model.version == version and not (result.binds or result.evictions or stats.prepared_jobs):
            self._memo = _Memo((version, names, paused), _next_event(state, self.search_backoff, now), result)
        return result

    def _candidate_table(self, stats: CycleStats) -> tuple[NodeTable, dict[TaskShape, Diagnosis]]:
        pending = [
            p
            for p in self.model.pods.values()
            if p.scheduler_name == self.config.schedulerName and p.state.value == "Pending"
        ]
        shapes = tuple(dict.fromkeys(TaskShape.of_pod(p) for p in pending))
        if not shapes:  # no round this cycle otherwise: a shard that died must still be noticed now
            _check(self.shards.heartbeat(), "heartbeat")
            return NodeTable(ResourceSchema()), {}
        replies = list(_check(self.shards.propose(ProposeRequest(shapes, max(len(pending), 1))), "propose").values())
        rows = merge_rows([r.rows for r in replies], _union_schema([r.rows for r in replies]))
        stats.candidate_nodes = len(rows)
        diagnoses: dict[TaskShape, Diagnosis] = {}
        for reply in replies:
            for shape, diagnosis in zip(shapes, reply.diagnoses, strict=True):
                known = diagnoses.get(shape)
                diagnoses[shape] = diagnosis if known is None else known.merged(diagnosis)
        return table_from_rows(rows), diagnoses

    def _full_table(self) -> NodeTable:
        _check(self.mirror.sync(self.shards), "rows")
        return self.mirror.session_table()

    # ------------------------------------------------------------------ commit
    def _commit_binds(self, state: SessionState, now: float, result: CycleResult) -> None:
        """Reserve each job's new binds on the shards involved; commit the jobs held everywhere.

        Two rounds: prepare, then commit and abort together. A job is bound only when every
        shard it touches said yes to both; a part committed on one shard of a job refused on
        another is released again. If a shard goes down in either round, nothing of the cycle
        is bound: what the live shards prepared is aborted, what they committed released."""
        by_job: dict[str, list[Task]] = defaultdict(list)
        for task in state.tasks.values():
            if task.status is Status.ALLOCATED and task.original_status is not Status.ALLOCATED:
                by_job[state.jobs_by_task[task.key].key].append(task)
        if not by_job:
            return
        items: dict[int, list[PrepareItem]] = defaultdict(list)
        rids: dict[str, str] = {}
        involved: dict[str, dict[int, list[Task]]] = {}
        for job_key, tasks in by_job.items():
            rid = f"e{self.epoch}c{self.cycles}/{job_key}"
            rids[job_key] = rid
            per_shard: dict[int, list[Task]] = defaultdict(list)
            for task in tasks:
                assert task.node is not None
                per_shard[self.shards.owner[task.node]].append(task)
            involved[rid] = per_shard
            for shard, shard_tasks in per_shard.items():
                items[shard].append(PrepareItem(rid, tuple(_placement(t) for t in shard_tasks)))
        prepared = self.shards.prepare(items, now)
        if prepared.down:
            held = {sid: list(reply.held) for sid, reply in prepared.replies.items()}
            _check(self.shards.settle({}, held, now), "abort after a failed prepare")
            raise _ShardLost(prepared.down, "prepare")
        refused: dict[str, str] = {}
        for reply in prepared.replies.values():
            refused.update(reply.refused)
        commit: dict[int, list[str]] = defaultdict(list)
        abort: dict[int, list[str]] = defaultdict(list)
        for rid, per_shard in involved.items():
            for sid in per_shard:
                (abort if rid in refused else commit)[sid].append(rid)
        settled = self.shards.settle(commit, abort, now)
        bound: set[str] = set()
        for rid, per_shard in involved.items():
            if rid in refused:
                continue
            verdicts = [settled.replies.get(sid, {}).get(rid, False) for sid in per_shard]
            if all(verdicts) and not settled.down & set(per_shard):
                bound.add(rid)
            else:
                refused[rid] = "the reservation expired before the bind was committed"
        if settled.down:
            bound.clear()  # the cycle fails as a whole: binds of the live shards are released too
        for rid, per_shard in involved.items():  # parts committed where the job as a whole is not bound
            if rid not in bound:
                for sid, tasks in per_shard.items():
                    if settled.replies.get(sid, {}).get(rid):
                        self.shards.release(sid, (self.model.pods[t.key] for t in tasks))
        if settled.down:
            raise _ShardLost(settled.down, "commit")
        result.stats.prepared_jobs, result.stats.aborted_jobs = len(rids), len(rids) - len(bound)
        placed: dict[str, str] = {}
        for job_key, rid in rids.items():
            if rid not in bound:
                self._retry_next_cycle(state, job_key, refused[rid], result)
                continue
            for task in by_job[job_key]:
                assert task.node is not None
                self.model.assume_bound(task.key, task.node, task.gpu_groups)
                result.binds.append(BindIntent(task.key, task.node, task.gpu_groups, rid))
                placed[task.key] = task.node
        self.shards.record_placed(placed)

    @staticmethod
    def _retry_next_cycle(state: SessionState, job_key: str, why: str, result: CycleResult) -> None:
        """A refused job is retried as a whole: the pods it was given in this session, pipelined
        ones included, are pending again (pipelined leftovers alone could be fewer than its gang)."""
        reason = f"capacity changed before the bind was committed ({why}); retried next cycle"
        for task in state.jobs[job_key].tasks:
            if task.status in (Status.ALLOCATED, Status.PIPELINED) and task.original_status is Status.PENDING:
                result.decisions.pods[task.key] = PodDecision("Pending", None, (), reason)
        result.decisions.pod_groups[job_key] = PodDecision("Pending", None, (), reason)

    def _remember_job_clock(self, state: SessionState) -> None:
        for key, when in state.last_start.items():
            self.model.set_last_start(key, when)
        for key, job in state.jobs.items():
            self.model.set_stale_since(key, job.stale_since)


@dataclass(frozen=True, slots=True)
class _Memo:
    key: tuple[object, ...]  # model version, actions, paused victim searches
    until: float  # the first moment a time-driven rule may decide otherwise
    result: CycleResult


def _next_event(state: SessionState, backoff: SearchBackoff, now: float) -> float:
    """When the next time-driven rule could change a session's decisions on this same cluster."""
    events = [until for until in backoff.pauses() if until > now]
    config = state.config
    for job in state.jobs.values():
        if job.stale_since is not None:
            own = job.group.staleness_grace_seconds
            grace = config.defaultStalenessGracePeriod if own is None else own
            if grace >= 0:
                events.append(job.stale_since + grace)
    runtimes = [m for m in (config.defaultPreemptMinRuntime, config.defaultReclaimMinRuntime) if m > 0]
    for started in state.last_start.values():
        events.extend(started + m for m in runtimes)
    return min((e for e in events if e > now), default=float("inf"))


class _ShardLost(Exception):
    def __init__(self, shards: frozenset[int], phase: str) -> None:
        super().__init__(phase)
        self.shards = shards
        self.phase = phase


R = TypeVar("R")


def _check(answers: Answers[R], phase: str) -> dict[int, R]:
    """The replies of a round in which every shard answered; otherwise the cycle is lost."""
    if answers.down:
        raise _ShardLost(answers.down, phase)
    return answers.replies


def _placement(task: Task) -> Placement:
    assert task.node is not None
    holding = task.holdings[-1]
    return Placement(
        task.key, task.node, task.pod.requests, False, task.pod.gpu_share, holding.shares, holding.created_groups
    )


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
