"""The coordinator: cluster model in, one scheduling cycle out, gangs committed across shards.

A cycle is one KAI session (DESIGN §3, "shards place, the coordinator arbitrates"):

1. *Arbitrate.* The session walks queues and jobs in KAI's order (fair share, limits, DRF)
   exactly as ever; what it does not do is look for nodes.
2. *Place and hold.* Where allocate needs a node for a pod, it takes the next placement of the
   pod's shape from ``coordinator.rounds``: in one round each shard places every pod of every
   pending shape it could be asked for, holds them, and answers with (node, count, score)
   streams, which merge into exactly the order a session scanning every node would use.
   Usually one round serves the whole allocate action.
3. *Whole-cluster actions.* Victim searches and stale-gang eviction need every node: the
   shards release what allocate did not take, and the coordinator's mirror of every row takes
   in only the rows that changed since it last looked; those actions run on a copy of it.
4. *Commit and release.* One more round commits the binds and releases the rest. A job is
   bound only when every shard it touches commits it (a hold past its deadline is refused);
   a refused job is pending again next cycle. Committed pods are assumed bound until the watch
   confirms them.

A shard that does not answer fails the cycle (``ShardsFailed``): nothing of it is bound, what
live shards hold for it is released, and the dead shard is replaced by a fresh one loaded
from the coordinator's model before the error is raised, so the next cycle schedules again.
A cycle with nothing new returns the last decisions without a session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

from coordinator.action_shares import ActionShares
from coordinator.actions import PausedSearches, VictimLists
from coordinator.actions.allocate import explain_unplaced
from coordinator.actions.registry import build_actions
from coordinator.admission import admit, with_gated
from coordinator.binding import BindCommit, BindSink, ShardLost, check, retry_next_cycle
from coordinator.cluster_model import ClusterModel
from coordinator.decisions import Decisions, Settled, collect
from coordinator.failures import CoordinatorLost, ShardsFailed
from coordinator.job_timers import remember_clocks
from coordinator.jobs import Job
from coordinator.node_mirror import NodeMirror
from coordinator.pod_maps import PodMaps, not_ready_gangs
from coordinator.reservation import next_reservation
from coordinator.results import BindIntent, CycleResult, CycleStats, EvictIntent
from coordinator.rounds import RoundPlacer, merged_diagnoses, pending_demand
from coordinator.search_backoff import SearchBackoff
from coordinator.session import SessionState
from coordinator.session_cache import SessionCache
from coordinator.session_open import open_session
from coordinator.session_rebase import rebase_session
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement
from coordinator.tasks import Status
from coordinator.topology import SessionDomains, wanted_topologies
from kai_ray.config import SchedulerConfig
from kai_ray.deltas import ClusterDeltas
from placement.node_table import NodeTable
from placement.placer import Placer
from placement.shapes import ResourceSchema, TaskShape
from shards.protocol import Round, ShardInfo
from shards.stream_messages import RoundReply

__all__ = ["BindIntent", "Coordinator", "CoordinatorLost", "CycleResult", "CycleStats", "EvictIntent", "ShardsFailed"]

EVICTION_ACTIONS = ("consolidation", "reclaim", "preempt")
# Every hold a cycle makes is committed or released in the same cycle, and shards also expire
# old ones whenever they prepare; the explicit sweep is a safety net for holds left by a crashed
# coordinator, so once in a while is enough. It rides with the cycle's first batch to each shard,
# ahead of that batch's own request, rather than costing a round trip of its own.
EXPIRY_SWEEP_SECONDS = 30.0


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
        self.sessions = SessionCache(config)
        self.pod_maps = PodMaps()  # each pod's queue and job, kept while no pod or job changes
        self._closing_seconds = 0.0  # what the last session took after its actions (see _run_cycle)
        self.action_shares = ActionShares(config.sessionTimeBudget or 0.0)  # the budget between searches
        self.settled = Settled()  # decisions that follow from records alone (decisions.collect)
        self.victim_lists = VictimLists()  # the victim searches' sorted jobs, kept across cycles
        self.paused_searches = PausedSearches()  # victim searches stopped at the time budget
        # Where a cycle hands its binds as their jobs are committed (the live loop sends them at
        # once); None: they are only in the cycle's result. Called on the cycle's thread.
        self.bind_sink: BindSink | None = None

    @property
    def epoch(self) -> int:
        return self.shards.epoch

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
        except ShardLost as lost:
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
        check(self.shards.heartbeat(), "heartbeat")
        return replace(
            memo.result, binds=[], evictions=list(memo.result.evictions), stats=CycleStats(reused=True), job_clocks={}
        )

    def _sweep(self, now: float) -> None:
        if now >= self._next_sweep:
            self.shards.expire_later(now)
            self._next_sweep = now + EXPIRY_SWEEP_SECONDS

    def _run_cycle(self, now: float, names: tuple[str, ...], started: float) -> CycleResult:
        self._memo = None
        version, paused = self.model.version, self.search_backoff.paused(now)
        self._sweep(now)
        stats = CycleStats()
        state = self._open_session(now, stats)
        searches = state.searches
        searches.lists = self.victim_lists
        searches.resumable = self.paused_searches
        searches.paused = paused
        searches.paused_reasons = self.search_backoff.reasons(paused)
        if self.config.sessionTimeBudget:
            # The searches stop early enough for what follows them (committing, deciding every
            # pod) to fit in the budget too: as long as that took last cycle.
            searches.deadline = started + self.config.sessionTimeBudget - self._closing_seconds
        stmt = self._statement(state, now, started)
        state.every_node = partial(self._every_node, state, stmt, stats)
        placer = state.source
        session_started = time.perf_counter()
        stats.open_seconds = session_started - started
        self.action_shares.run(build_actions(names), state, stmt, stats)
        closing = time.perf_counter()
        stats.session_seconds = closing - session_started
        stats.candidate_nodes = len(state.table)
        result = CycleResult(Decisions(), stats=stats)
        self._commit(state, stmt, placer, now + (closing - started), result)
        stats.commit_seconds = time.perf_counter() - closing
        result.decisions = collect(state, stmt.evictions, self.settled, stmt.touched)
        for job_key, why in result.refused.items():
            retry_next_cycle(state, job_key, why, result)
        if self.model.gated:  # judged on the queues as this session leaves them
            admission = admit(state, self.model.gated, self.model.pod_groups)
            result.decisions = with_gated(result.decisions, admission)
            result.ungates = admission.ungate
            result.gated_by_queue, result.gated_by_group = admission.by_queue, admission.by_group
        result.pod_queues, result.pod_jobs = self.pod_maps.of(state)
        result.not_ready_jobs = not_ready_gangs(state, stmt.touched)
        result.search_skipped = dict(state.searches.skipped)
        result.paused_jobs = frozenset(job for job, _ in state.searches.paused)
        # Only a pod placed before this session is there to evict. One that an action placed and a
        # later action evicted again in the same session is simply not bound; an eviction sent for
        # it would delete a pending pod (the API deletes unbound pods on eviction).
        result.evictions = [
            EvictIntent(pod, action, by)
            for pod, action, by in result.decisions.evictions
            if state.tasks[pod].original_status.active_used
        ]
        evicted = {state.jobs_by_task[e.pod].key for e in result.evictions if e.pod in state.jobs_by_task}
        result.job_clocks = remember_clocks(
            self.model.pod_groups, state.maybe_changed_jobs(stmt.touched), state.last_start, evicted, now
        )
        if result.job_clocks:  # the pod groups changed: the next cycle must not be memoized
            self.model.clocks_changed(result.job_clocks)
        # A job whose search one action stopped at the time budget is not held back because another
        # action's search for it failed: the stopped search goes on next cycle.
        stopped = self.paused_searches.jobs()
        failed = {(job, action) for job, action in state.searches.failed if job not in stopped}
        self.search_backoff.record(
            now,
            failed,
            {j.key for j in state.pending_jobs() if j.has_pending()},
            {job: _search_reasons(state.jobs[job]) for job, _ in failed if job in state.jobs},
        )
        self.paused_searches.keep_only(state.jobs)
        if state.membership is not None:  # opened by the session cache: it resets what we changed
            self.sessions.close(state, stmt.touched)
        unfinished = state.searches.cut_short  # the jobs not reached must be searched next cycle
        stats.cut_short = unfinished
        if self.model.version == version and not (
            result.binds or result.evictions or stats.prepared_jobs or unfinished
        ):
            self._memo = _Memo((version, names, paused), _next_event(state, self.search_backoff, now), result)
        stats.close_seconds = time.perf_counter() - closing
        self._closing_seconds = stats.close_seconds
        return result

    # ------------------------------------------------------------------ the session's nodes
    def _open_session(self, now: float, stats: CycleStats) -> SessionState:
        """The session: kept from earlier cycles and placing through the shards; or, when DRA is
        in use (devices published, claims, or pods asking for them), opened from scratch on every
        node's row (a claim's devices are allocated by the session's own device book, which the
        shards' streams do not carry). Device classes alone change nothing.
        A pending job with a sub-group tree or a topology constraint chooses among domains and
        node sets, so its session also moves onto every node's row, with the shards' domains."""
        if self.model.uses_dra:
            stats.full_table = True
            snapshot, gated = self.model.snapshot(), tuple(self.model.gated.values())
            state = open_session(snapshot, self.config, now, self._whole_table(), self.placer_type, gated)
        else:
            state = self.sessions.open(self.model, now, self._session_table(), self.placer_type)
            if not any(job.tree is not None for job in state.pending_jobs()):
                return state
            if not stats.full_table and not len(state.table):
                rebase_session(state, self._whole_table())
            stats.full_table = True
        topologies = wanted_topologies((job.group for job in state.pending_jobs()), state.topologies)
        if topologies:
            reports = check(self.shards.domains(topologies), "domains")
            state.domains = SessionDomains.from_reports(topologies, [reports[sid] for sid in sorted(reports)])
        return state

    def _session_table(self) -> NodeTable:
        """The table a session starts on: none, since the shards place (see ``_whole_cluster``)."""
        return NodeTable(ResourceSchema())

    def _whole_table(self) -> NodeTable:
        """A copy of every node's row a session may change (the mirror, brought up to date)."""
        check(self.mirror.sync(self.shards), "rows")
        return self.mirror.session_table()

    def _statement(self, state: SessionState, now: float, started: float) -> Statement:
        """A statement whose allocate takes placements from the shards' streams. Their holds last
        a reservation TTL from the latest round, so a long session keeps what it placed early."""
        if state.table:  # a session on every node's row places pod by pod on it
            return Statement(state.table, state.queues, state.jobs_by_task)
        pending = state.pending_at_open
        if pending is None:
            pending = [task for task in state.tasks.values() if task.status is Status.PENDING]
        if not pending:  # no round this cycle otherwise: a shard that died must still be noticed now
            check(self.shards.heartbeat(), "heartbeat")
            return Statement(state.table, state.queues, state.jobs_by_task)
        demand = pending_demand((task.key, task.shape) for task in pending)  # every job's: an upper bound
        clock = partial(_cycle_time, now, started)
        pid = f"e{self.epoch}c{self.cycles}"
        state.source = RoundPlacer(self.shards, pid, clock, demand, check, nodes=len(self.shards.owner))
        return Statement(state.table, state.queues, state.jobs_by_task, source=state.source)

    def _every_node(self, state: SessionState, stmt: Statement, stats: CycleStats) -> None:
        """``SessionState.every_node``: the first call moves a session that started on no node's
        row (the shards placed for allocate) onto every node's row; later calls, and sessions
        opened on every row, find it there already."""
        if stats.full_table or len(state.table):
            return
        self._whole_cluster(state, stmt)
        stmt.move_to(state.table)
        stats.full_table = True

    def _whole_cluster(self, state: SessionState, stmt: Statement) -> None:
        """Move the session onto a copy of every node's row. In the same round the shards drop
        what allocate did not take (and say why the shapes it found no room for do not fit), so
        the rows already carry every placement the session made."""
        source = state.source
        before = None
        if source is not None and source.rounds:
            shapes = _unplaced_shapes(state)
            before = {sid: Round(source.sync_request(sid, shapes)) for sid in self.shards.ids}
        firsts = check(self.mirror.sync(self.shards, before), "rows")
        if source is not None and before:
            diagnoses = {
                sid: reply.diagnosed(source.table) for sid, reply in firsts.items() if isinstance(reply, RoundReply)
            }
            state.shard_diagnoses.update(merged_diagnoses(diagnoses))
            _explain_unplaced(state)
        rebase_session(state, self.mirror.session_table(), stmt.picks)
        state.source = None  # allocate after this point places on the table (an unusual action order)

    # ------------------------------------------------------------------ commit
    def _commit(
        self, state: SessionState, stmt: Statement, placer: RoundPlacer | None, now: float, result: CycleResult
    ) -> None:
        """Settle what the shards placed, then prepare and commit what the session placed itself."""
        # A session on every node's row prepares its own placements after the settle, and a shard
        # lost there fails the whole cycle: nothing of it may have left by then.
        prepares = bool(len(state.table))
        commit = BindCommit(
            self.shards, self.model, f"e{self.epoch}c{self.cycles}", None if prepares else self.bind_sink
        )
        if placer is not None and placer.rounds:
            result.stats.place_rounds = placer.rounds
            state.shard_diagnoses.update(commit.settle(state, placer, stmt.picks, now, result))
        commit.sink = self.bind_sink
        try:
            commit.prepare_and_commit(state, stmt.picks, now, result)
        except ShardLost:
            # The settle's binds were final (the model assumes them bound) but the failed cycle
            # hands them to no one: without this they would stay "binding" for good. They are
            # pending again and their capacity returns, as when the adapter reports a bind failed.
            self.bind_failed([bind.pod for bind in result.binds[result.streamed :]])
            raise
        commit.hand_out(result)  # what the settle committed, when no prepare followed with more
        _explain_unplaced(state)


def _search_reasons(job: Job) -> dict[str, str]:
    """What a job's victim searches said in this session (allocate's reason is recomputed every cycle)."""
    return {action: why for action, why in job.fit_errors.items() if action in EVICTION_ACTIONS}


def _unplaced_shapes(state: SessionState) -> tuple[TaskShape, ...]:
    return tuple(dict.fromkeys(task.shape for task, _ in state.unplaced.values()))


def _explain_unplaced(state: SessionState) -> None:
    for job_key, (task, prefix) in state.unplaced.items():
        diagnosis = state.shard_diagnoses.get(task.shape)
        if diagnosis is not None and not state.jobs[job_key].fit_errors.get("allocate"):
            explain_unplaced(state.jobs[job_key], prefix, diagnosis.describe(task.shape))


@dataclass(frozen=True, slots=True)
class _Memo:
    key: tuple[object, ...]  # model version, actions, paused victim searches
    until: float  # the first moment a time-driven rule may decide otherwise
    result: CycleResult


def _next_event(state: SessionState, backoff: SearchBackoff, now: float) -> float:
    """When the next time-driven rule could change a session's decisions on this same cluster."""
    events = [until for until in backoff.pauses() if until > now]
    config = state.config
    for job in state.jobs.values() if state.stale_watch is None else state.in_session_order(state.stale_watch):
        if job.stale_since is not None:
            own = job.group.staleness_grace_seconds
            grace = config.defaultStalenessGracePeriod if own is None else own
            if grace >= 0:
                events.append(job.stale_since + grace)
    runtimes = [m for m in (config.defaultPreemptMinRuntime, config.defaultReclaimMinRuntime) if m > 0]
    for started in state.last_start.values() if runtimes else ():
        events.extend(started + m for m in runtimes)
    events.append(next_reservation(state))  # a gang that begins to hold nodes changes who goes where
    return min((e for e in events if e > now), default=float("inf"))


def _cycle_time(now: float, started: float) -> float:
    """The cycle's clock: its start time plus the time it has run (as the commit reckons it)."""
    return now + (time.perf_counter() - started)
