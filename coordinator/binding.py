"""Committing a cycle's binds across shards: each job is bound on every shard it touches, or on none.

Two ways in, one rule. Placements the shards chose (allocate's streams) are already held: one
round settles them, committing the binds and releasing the rest. Placements the session chose on
its own table (allocate after a victim search built one, the baseline) are prepared first, then
committed and aborted in one more round. Either way a job is bound only when every shard it
touches answers yes (a shard past the hold's deadline says no); the parts committed where the
job as a whole is refused are released again, and the job is placed in a later cycle. A shard
that does not answer ends the cycle: nothing of it is bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import TypeVar

from coordinator.cluster_model import ClusterModel
from coordinator.decisions import PodDecision
from coordinator.results import BindIntent, CycleResult
from coordinator.rounds import Pick, RoundPlacer, merged_diagnoses
from coordinator.session import SessionState
from coordinator.shard_client import Answers
from coordinator.shard_set import ShardSet
from coordinator.tasks import Status, Task, moved_in_session
from placement.diagnosis import Diagnosis
from placement.shapes import TaskShape
from shards.messages import Placement, PrepareItem

R = TypeVar("R")
RETRY = "capacity changed before the bind was committed ({why}); retried next cycle"
# Pods per run handed to the bind sink: the first run small, so the first bind leaves as soon as
# its job is committed; later runs larger, so a cycle of ten thousand binds is a few dozen calls.
FIRST_RUN = 16
LONGEST_RUN = 1024
BindSink = Callable[[list[BindIntent]], None]


class ShardLost(Exception):
    """A shard did not answer in some phase of the cycle."""

    def __init__(self, shards: frozenset[int], phase: str) -> None:
        super().__init__(phase)
        self.shards = shards
        self.phase = phase


def check(answers: Answers[R], phase: str) -> dict[int, R]:
    """The replies of a round in which every shard answered; otherwise the cycle is lost."""
    if answers.down:
        raise ShardLost(answers.down, phase)
    return answers.replies


class BindCommit:
    def __init__(self, shards: ShardSet, model: ClusterModel, rid_prefix: str, sink: BindSink | None = None) -> None:
        self.shards = shards
        self.model = model
        self.rid_prefix = rid_prefix  # e<epoch>c<cycle>
        # Binds committed on every shard they touch are final (the model assumes them bound): the
        # sink gets them run by run, whole jobs each, while the cycle goes on concluding the others
        # and collecting its decisions. ``result.streamed`` counts them (a prefix of ``result.binds``).
        self.sink = sink
        self._run = FIRST_RUN

    def _new_binds(self, state: SessionState, picked: bool, picks: Mapping[str, Pick]) -> dict[str, list[Task]]:
        """Per job, the pods this session placed on free capacity, from the streams or not."""
        by_job: dict[str, list[Task]] = defaultdict(list)
        tasks = state.tasks
        candidates = [tasks[key] for key in picks] if picked else moved_in_session(tasks.values())
        for task in candidates:
            new = task.status is Status.ALLOCATED and task.original_status is not Status.ALLOCATED
            if new and (picked or task.key not in picks):
                by_job[state.jobs_by_task[task.key].key].append(task)
        return by_job

    # ------------------------------------------------------------------ the shards' placements
    def settle(
        self, state: SessionState, source: RoundPlacer, picks: Mapping[str, Pick], now: float, result: CycleResult
    ) -> dict[TaskShape, Diagnosis]:
        """One round: commit what allocate took from the streams, release the rest, and ask why
        the shapes allocate found no room for do not fit (their diagnoses come back)."""
        by_job = self._new_binds(state, True, picks)
        binds: dict[int, list[tuple[str, str, TaskShape, int]]] = defaultdict(list)
        involved: dict[str, dict[int, list[Task]]] = {}
        for job_key, tasks in by_job.items():
            rid = f"{self.rid_prefix}/{job_key}"
            per_shard: dict[int, list[Task]] = defaultdict(list)
            for task in tasks:
                pick = picks[task.key]
                per_shard[pick.shard].append(task)
                binds[pick.shard].append((task.key, rid, pick.shape, pick.position))
            involved[rid] = per_shard
        diagnose = tuple(dict.fromkeys(task.shape for task, _ in state.unplaced.values()))
        settled = source.settle(binds, diagnose, now)
        replies = {sid: reply.committed for sid, reply in settled.replies.items()}
        self._conclude(by_job, involved, {}, replies, settled.down, result)
        return merged_diagnoses({sid: reply.diagnosed(source.table) for sid, reply in settled.replies.items()})

    # ------------------------------------------------------------------ the session's placements
    def prepare_and_commit(
        self, state: SessionState, picks: Mapping[str, Pick], now: float, result: CycleResult
    ) -> None:
        """Reserve each job's new binds on the shards involved; commit the jobs held everywhere."""
        if not len(state.table):
            return  # a session on no node's row placed nothing itself: the shards' streams did
        by_job = self._new_binds(state, False, picks)
        # A job that took pods from the streams before the session moved onto every row and more
        # on the rows after (an elastic job allocate came back to) is one job: refused at the
        # settle, none of its pods may bind, so its later ones are not even prepared.
        for job_key in [key for key in by_job if key in result.refused]:
            del by_job[job_key]
        if not by_job:
            return
        items: dict[int, list[PrepareItem]] = defaultdict(list)
        involved: dict[str, dict[int, list[Task]]] = {}
        for job_key, tasks in by_job.items():
            rid = f"{self.rid_prefix}/{job_key}"
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
            check(self.shards.settle({}, held, now), "abort after a failed prepare")
            raise ShardLost(prepared.down, "prepare")
        refused: dict[str, str] = {}
        for reply in prepared.replies.values():
            refused.update(reply.refused)
        commit: dict[int, list[str]] = defaultdict(list)
        abort: dict[int, list[str]] = defaultdict(list)
        for rid, per_shard in involved.items():
            for sid in per_shard:
                (abort if rid in refused else commit)[sid].append(rid)
        settled = self.shards.settle(commit, abort, now)
        self._conclude(by_job, involved, refused, settled.replies, settled.down, result)

    # ------------------------------------------------------------------ both
    def _conclude(
        self,
        by_job: dict[str, list[Task]],
        involved: dict[str, dict[int, list[Task]]],
        refused: dict[str, str],
        verdicts: Mapping[int, Mapping[str, bool]],
        down: frozenset[int],
        result: CycleResult,
    ) -> None:
        bound: set[str] = set()
        for rid, per_shard in involved.items():
            if rid in refused:
                continue
            if all(verdicts.get(sid, {}).get(rid, False) for sid in per_shard) and not down & set(per_shard):
                bound.add(rid)
            else:
                refused[rid] = "the hold expired before the bind was committed"
        if down:
            bound.clear()  # the cycle fails as a whole: binds of the live shards are released too
        for rid, per_shard in involved.items():  # parts committed where the job as a whole is not bound
            if rid not in bound:
                for sid, tasks in per_shard.items():
                    if verdicts.get(sid, {}).get(rid):
                        self.shards.release(sid, (self.model.pods[t.key] for t in tasks))
        if down:
            raise ShardLost(down, "commit")
        result.stats.prepared_jobs += len(involved)
        result.stats.aborted_jobs += len(involved) - len(bound)
        placed: dict[str, str] = {}
        for job_key, tasks in by_job.items():
            rid = f"{self.rid_prefix}/{job_key}"
            if rid not in bound:
                result.refused[job_key] = refused[rid]
                continue
            for task in tasks:
                assert task.node is not None
                self.model.assume_bound(task.key, task.node, task.gpu_groups, task.claims)
                result.binds.append(BindIntent(task.key, task.node, task.gpu_groups, rid, task.claims))
                placed[task.key] = task.node
            if len(result.binds) - result.streamed >= self._run:
                self.hand_out(result)
        self.shards.record_placed(placed)
        self.hand_out(result)

    def hand_out(self, result: CycleResult) -> None:
        """The committed binds not handed out yet, to the sink (a job's pods are never split)."""
        if self.sink is None or len(result.binds) == result.streamed:
            return
        run = result.binds[result.streamed :]
        result.streamed = len(result.binds)
        self._run = min(LONGEST_RUN, self._run * 4)
        self.sink(run)


def retry_next_cycle(state: SessionState, job_key: str, why: str, result: CycleResult) -> None:
    """A refused job is retried as a whole: the pods it was given in this session, pipelined
    ones included, are pending again (pipelined leftovers alone could be fewer than its gang)."""
    reason = RETRY.format(why=why)
    # Pods of it the settle bound before the session moved onto every row (an elastic job's
    # first pods) stay bound; the rest wait, and the group says why.
    bound = {bind.pod for bind in result.binds if bind.reservation.endswith("/" + job_key)}
    for task in state.jobs[job_key].tasks:
        if task.key in bound:
            continue
        if task.status in (Status.ALLOCATED, Status.PIPELINED) and task.original_status is Status.PENDING:
            result.decisions.pods[task.key] = PodDecision("Pending", None, (), reason)
    result.decisions.pod_groups[job_key] = PodDecision("Pending", None, (), reason)


def _placement(task: Task) -> Placement:
    assert task.node is not None
    holding = task.holdings[-1]
    claims = tuple((g.claim, tuple(r.key for r in g.allocation.results)) for g in task.claims)
    return Placement(
        task.key,
        task.node,
        task.pod.requests,
        False,
        task.pod.gpu_share,
        holding.shares,
        holding.created_groups,
        claims,
    )
