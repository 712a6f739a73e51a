"""The invariants (docs/architecture.md#invariants) as properties of one cycle on random small clusters and workloads.

Each example is a cluster of 1-8 nodes, a 1-6 queue tree and up to 12 gangs (whole GPUs,
fractions, CPU-only pods; some running or terminating; priorities on both sides of 100),
scheduled with the full action list. The checks in ``decision_checks`` recompute capacity,
gangs, queue limits and evictions from the decisions alone. The regressions at the end are
the smallest cases these properties found.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.actions.allocate import allocate_job
from coordinator.coordinator import Coordinator, CycleResult
from coordinator.decisions import Decisions
from coordinator.scheduler import run_session
from coordinator.session_open import open_session
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement
from coordinator.tasks import Status
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import ClusterSnapshot, Pod, PodState, ResourceVector
from placement.diagnosis import Diagnosis
from placement.holdings import Kind
from placement.placer import Choice, PlacementPolicy
from placement.rows import merge_rows, table_from_rows
from placement.shapes import CPU, GPU, PODS, TaskShape
from shards.messages import ShardDeltas
from shards.protocol import Batch, BatchReply, Settle, ShardDown
from shards.shard import Shard
from shards.stream_messages import SettleRequest
from tests.builders import GIB, JobSpec, build, config, node, queue
from tests.coordinator.decision_checks import check_decisions
from tests.coordinator.random_clusters import NOW, clusters, shuffled

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
PROPERTY = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def cycle(snapshot: ClusterSnapshot, shards: int = 1, actions: Sequence[str] = ACTIONS) -> CycleResult:
    coordinator = in_process_coordinator(config(), shards)
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator.cycle(NOW, actions)


def comparable(decisions: Decisions) -> tuple[Any, ...]:
    """Decisions as a value; evictions as a multiset (stale gangs are evicted in input order)."""
    return decisions.pods, decisions.pod_groups, decisions.queues, sorted(decisions.evictions, key=str)


# ------------------------------------------------------------------ invariants 1, 2, 4, 6
@PROPERTY
@given(clusters())
def test_one_cycle_keeps_capacity_gangs_queue_limits_and_eviction_rules(snapshot: ClusterSnapshot) -> None:
    result = cycle(snapshot)
    check_decisions(snapshot, result.decisions)
    assert result.stats.aborted_jobs == 0, "the session placed something its own shards refused"
    new_binds = {k for k, d in result.decisions.pods.items() if d.status == "Binding" and k in _pending_keys(snapshot)}
    assert {b.pod for b in result.binds} == new_binds
    # Pods placed and evicted again within the session are not bound, so there is nothing to evict:
    # only pods that held a node when the session opened get an eviction sent (a pending pod would be deleted).
    placed = {p.key for p in snapshot.pods if p.state.holds_node or p.state is PodState.PIPELINED}
    sent = {(e.pod, e.action, e.preemptor) for e in result.evictions}
    assert sent == {e for e in result.decisions.evictions if e[0] in placed}


def _pending_keys(snapshot: ClusterSnapshot) -> set[str]:
    return {p.key for p in snapshot.pods if p.state is PodState.PENDING}


# ------------------------------------------------------------------ invariant 5
@settings(PROPERTY, max_examples=120)
@given(clusters(), st.randoms(use_true_random=False))
def test_same_snapshot_gives_the_same_decisions_in_any_object_order(
    snapshot: ClusterSnapshot, rng: random.Random
) -> None:
    first = comparable(cycle(snapshot).decisions)
    assert comparable(cycle(snapshot).decisions) == first
    assert comparable(cycle(shuffled(snapshot, rng)).decisions) == first


@settings(PROPERTY, max_examples=120)
@given(clusters())
def test_decisions_do_not_depend_on_the_number_of_shards(snapshot: ClusterSnapshot) -> None:
    one = comparable(cycle(snapshot, shards=1).decisions)
    assert comparable(cycle(snapshot, shards=2).decisions) == one
    assert comparable(cycle(snapshot, shards=4).decisions) == one


# ------------------------------------------------------------------ invariant 3
class _LateArrival(InProcessTransport):
    """In-process shards where, just before the first binds are committed, a pod of another
    scheduler takes all the CPU the kubelet sees free on the node of the first bind (the
    shard's holds are invisible to it): a cluster change that slips in after the shard placed
    and held the pods, which the shard's re-check at commit must catch."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        super().__init__(shards)
        self.coordinator: Coordinator | None = None
        self.armed = True
        self.blocked: str | None = None  # the node that filled up

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        settles = [
            (sid, r.request)
            for sid, b in sorted(batches.items())
            for r in b.requests
            if isinstance(r, Settle) and len(r.request.binds)
        ]
        if self.armed and settles:
            self.armed = False
            self._fill_first_node(*settles[0])
        return super().exchange(batches)

    def _fill_first_node(self, shard_id: int, settle: SettleRequest) -> None:
        assert self.coordinator is not None
        shard = self.shards[shard_id]
        assert shard.proposal is not None
        binds = settle.binds
        shape, wanted = settle.taken.table()[int(binds.shape[0])], int(binds.position[0])
        position, row = 0, -1
        for entry in shard.proposal.streams[shape]:
            if position <= wanted < position + entry.count:
                row = entry.row
            position += entry.count
        table = shard.table
        target = table.names[row]
        held = [e for e in shard.proposal.holdings_entries() if e.row == row and e.kind is Kind.ACTIVE]
        free_cpu = float(table.idle[row, CPU]) + sum(float(e.vector[CPU]) * e.count for e in held)
        blocker = Pod(
            "kube-system",
            "late-arrival",
            uid="uid-late",
            scheduler_name="default-scheduler",
            state=PodState.RUNNING,
            node=target,
            requests=ResourceVector.of(cpu=free_cpu, pods=1),
        )
        self.coordinator.apply(ClusterDeltas(pods_upserted=(blocker,)))
        self.coordinator.shards.flush()  # the change reaches the shard before the commit does
        self.blocked = target


def _coordinator_with_late_arrival(snapshot: ClusterSnapshot, shards: int) -> tuple[Coordinator, _LateArrival]:
    cfg = config()
    backend = _LateArrival([Shard(i, PlacementPolicy.of(cfg)) for i in range(shards)])
    coordinator = backend.coordinator = Coordinator(cfg, ShardSet(backend))
    coordinator.apply(ClusterDeltas.of_snapshot(snapshot))
    return coordinator, backend


RETRY = "before the bind was committed"


@settings(PROPERTY, max_examples=120)
@given(clusters(), st.sampled_from((1, 2, 4)))
def test_a_reservation_refused_after_a_late_change_binds_nothing_and_leaves_no_trace(
    snapshot: ClusterSnapshot, shards: int
) -> None:
    coordinator, backend = _coordinator_with_late_arrival(snapshot, shards)
    first = coordinator.cycle(NOW, ACTIONS)
    if backend.blocked is None:
        return  # nothing was bound in this example: no prepare to interfere with
    refused = [k for k, d in first.decisions.pods.items() if RETRY in d.reason]
    retried = frozenset(k for k, d in first.decisions.pod_groups.items() if RETRY in d.reason)
    assert first.stats.aborted_jobs == len(retried) >= 1 and refused
    assert not {b.pod for b in first.binds} & set(refused), "a refused job must not bind any of its pods"
    assert all(b.node != backend.blocked for b in first.binds), "nothing binds onto the capacity that went away"
    check_decisions(snapshot, first.decisions, retried)
    for shard in backend.shards.values():
        assert shard.book.prepared() == [], "every reservation is committed or aborted within the cycle"
        assert shard.proposal is None, "every hold is committed or released within the cycle"
    # Next cycle the refused pods are ordinary pending pods again, and the shards hold exactly what
    # the coordinator's model says: a fresh coordinator given that model decides the same.
    fresh = in_process_coordinator(config(), shards)
    fresh.apply(ClusterDeltas.of_snapshot(coordinator.model.snapshot()))
    second = coordinator.cycle(NOW + 1, ("allocate",))
    assert comparable(second.decisions) == comparable(fresh.cycle(NOW + 1, ("allocate",)).decisions)
    assert not any(RETRY in second.decisions.pods[k].reason for k in refused)


# ------------------------------------------------------------------ regressions found above
def test_a_victim_whose_optional_sub_group_is_empty_still_gives_pods_back() -> None:
    """The victim's optional sub-group (minimum 0) loses its only pod first; the search must then
    go on to the surplus pod of the other sub-group instead of offering the same job forever."""
    victim = JobSpec(
        "victim",
        "q",
        pods=3,
        gpu=1,
        priority=50,
        min_member=1,
        running_on=["a", "a", "a"],
        sub_groups=[("core", 1), ("extra", 0)],
    )  # core: victim-0, victim-2; extra: victim-1
    snapshot = build(
        [node("a", gpu=4)], [queue("q", gpu_quota=4)], [victim, JobSpec("urgent", "q", gpu=3, priority=125, created=1)]
    )
    pods = run_session(snapshot, config(), NOW, ["preempt"]).pods
    assert pods["default/urgent-0"].status == "Pipelined"
    assert [pods[f"default/victim-{i}"].status for i in range(3)] == ["Running", "Releasing", "Releasing"]


def test_an_undone_eviction_keeps_the_pod_slot_of_the_shared_gpus_reservation_pod() -> None:
    snapshot = build(
        [node("a", gpu=2, pods=4)],
        [queue("q", gpu_quota=2)],
        [JobSpec("half", "q", fraction=0.5, running_on=["a"], gpu_groups=["a-shared0"])],
    )
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=snapshot.nodes, pods_upserted=snapshot.pods))
    table = table_from_rows(merge_rows([shard.rows()], shard.table.schema))
    state = open_session(snapshot, config(), NOW, table)
    slots_before = float(table.idle[0, PODS])
    assert slots_before == 2  # the pod and its shared GPU's reservation pod
    stmt = Statement(state.table, state.queues, state.jobs_by_task)
    task = state.tasks["default/half-0"]
    stmt.evict(task, "preempt", None)
    stmt.rollback()
    assert task.status is Status.RUNNING
    assert float(table.idle[0, PODS]) == slots_before and table.groups[0]["a-shared0"].owns_slot


def test_a_victim_found_back_where_it_runs_is_not_returned_unchecked_to_where_it_was_moved() -> None:
    """``moved`` ran on a, was evicted and pipelined to b by a committed statement, then evicted
    from b, whose GPU another pod took. Put back on a (which still lists it), taking back the
    eviction from b would leave two pods waiting on b's one GPU; it is pipelined on a instead."""
    snapshot = build(
        [node("a", gpu=2), node("b", gpu=1)],
        [queue("q", gpu_quota=3)],
        [
            JobSpec("moved", "q", running_on=["a"]),
            JobSpec("stays", "q", running_on=["a"], created=1),
            JobSpec("newcomer", "q", created=2),
        ],
    )
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=snapshot.nodes, pods_upserted=snapshot.pods))
    table = table_from_rows(merge_rows([shard.rows()], shard.table.schema))
    state = open_session(snapshot, config(), NOW, table)
    a, b = table.names.index("a"), table.names.index("b")
    stmt = Statement(state.table, state.queues, state.jobs_by_task)
    moved, newcomer = state.tasks["default/moved-0"], state.tasks["default/newcomer-0"]
    stmt.evict(moved, "consolidation", "default/other")
    stmt.place(moved, Choice(b, pipelined=True), state.accepted_quota(moved, b))
    stmt.commit()
    stmt.evict(moved, "consolidation", "default/newcomer")
    stmt.place(newcomer, Choice(b, pipelined=True), state.accepted_quota(newcomer, b))

    assert allocate_job(state, stmt, state.jobs_by_task[moved.key], pipeline_only=True, real=False)
    assert (moved.status, moved.node) == (Status.PIPELINED, "a")
    assert table.future[b, GPU] >= 0 and table.future[a, GPU] >= 0


def test_a_terminating_fraction_keeps_its_reservation_slot_and_binding_needs_a_free_slot_now() -> None:
    """3 pod slots: the terminating fraction and its reservation pod take two, so one pod binds
    now and the other waits (pipelined) for the fraction to go, without the shard refusing it."""
    leaving = JobSpec("leaving", "q", fraction=0.5, releasing_on=["a"], gpu_groups=["a-shared0"])
    snapshot = build(
        [node("a", gpu=8, pods=3)],
        [queue("q", gpu_quota=8)],
        [leaving, JobSpec("one", "q", gpu=1, created=1), JobSpec("two", "q", gpu=1, created=2)],
    )
    result = cycle(snapshot)
    assert result.stats.aborted_jobs == 0
    statuses = {result.decisions.pods[f"default/{name}-0"].status for name in ("one", "two")}
    assert statuses == {"Binding", "Pipelined"}


def test_a_refused_job_is_retried_whole_its_pipelined_pods_included() -> None:
    """One pod of the elastic job binds now, the other waits for the terminating pod's GPU; when
    the bind is refused, both are pending again (not a lone pipelined pod) and nothing is bound."""
    snapshot = build(
        [node("a", gpu=2)],
        [queue("q", gpu_quota=2)],
        [
            JobSpec("leaving", "q", gpu=1, releasing_on=["a"]),
            JobSpec("elastic", "q", pods=2, gpu=1, min_member=1, created=1),
        ],
    )
    assert {d.status for k, d in cycle(snapshot).decisions.pods.items() if "elastic" in k} == {"Binding", "Pipelined"}
    coordinator, backend = _coordinator_with_late_arrival(snapshot, shards=1)
    result = coordinator.cycle(NOW, ACTIONS)
    assert backend.blocked == "a" and result.binds == []
    for key in ("default/elastic-0", "default/elastic-1", "default/elastic"):
        decision = result.decisions.pods.get(key) or result.decisions.pod_groups[key]
        assert decision.status == "Pending" and RETRY in decision.reason


def test_a_pending_reason_reads_the_same_whichever_shard_answered_first() -> None:
    gpus, cpus = "node(s) didn't have enough resources: GPUs", "node(s) didn't have enough resources: CPU cores"
    near = Diagnosis(2, {gpus: 1, cpus: 1}, {"gpu": 8.0})
    far = Diagnosis(2, {cpus: 2}, {"gpu": 8.0})
    shape = TaskShape.of_pod(build([node("a")], [queue("q")], [JobSpec("j", "q", gpu=9)]).pods[0])
    assert near.merged(far).describe(shape) == far.merged(near).describe(shape)


def test_a_job_placed_on_the_streams_and_then_on_every_row_is_refused_once_and_binds_nothing() -> None:
    """The elastic job takes its minimum from the shards' streams; the next job's size re-places
    the streams, so allocate moves onto every row and gives the elastic job its other pods
    there. The node of its first pods fills before the settle: the job is refused as a whole,
    once (it used to be concluded again with its later pods, and could bind them alone)."""
    snapshot = build(
        [node("n0", gpu=8), node("n1", gpu=8)],
        [queue("q", gpu_quota=16)],
        [
            JobSpec("el", "q", pods=4, min_member=2, gpu=1, created=0.0),
            JobSpec("b", "q", pods=1, gpu=2, created=1.0),
            JobSpec("c", "q", pods=1, gpu=1, created=2.0),
        ],
    )
    coordinator, backend = _coordinator_with_late_arrival(snapshot, 2)
    first = coordinator.cycle(NOW, ("allocate",))
    assert backend.blocked is not None and first.stats.full_table
    retried = {k for k, d in first.decisions.pod_groups.items() if RETRY in d.reason}
    assert "default/el" in retried and first.stats.aborted_jobs == len(retried)
    assert not [b.pod for b in first.binds if b.pod.startswith("default/el-")]


def test_a_gang_short_of_room_reads_the_same_reason_whatever_order_its_cluster_was_listed_in() -> None:
    """The gang j10 finds room for one pod of the two it needs. Its reason lists why each node
    turns its next pod away, read once the session leaves the shards' streams for every node's
    row; when that happened depended on the order of the shapes' streams, which followed the
    order the pods were listed in (before or after j2's pod took n2's last pod slot)."""
    nodes = [
        node("n0", gpu=2, cpu=16_000, memory=64 * GIB, gpu_memory=40_960),
        node("n1", gpu=4, cpu=16_000, memory=64 * GIB, gpu_memory=40_960),
        node("n2", gpu=8, cpu=16_000, memory=64 * GIB, pods=6, gpu_memory=40_960),
        node("n3", gpu=8, cpu=16_000, memory=64 * GIB, gpu_memory=40_960),
        node("n4", gpu=0, cpu=16_000, memory=64 * GIB, gpu_memory=40_960),
    ]
    jobs = [
        JobSpec("j0", "q0", gpu=2, releasing_on=["n0"], created=0.0, cpu=500),
        JobSpec("j1", "q0", gpu=3, running_on=["n1"], created=1.0, cpu=500),
        JobSpec("j2", "q0", gpu=3, created=2.0, cpu=500),
        JobSpec("j3", "q0", gpu=1, created=3.0, cpu=500),
        JobSpec("j4", "q0", pods=2, min_member=1, gpu=2, releasing_on=["n2"], created=4.0, cpu=500),
        JobSpec("j5", "q0", gpu=2, priority=75, created=5.0, cpu=500),
        JobSpec("j6", "q0", gpu=1, created=6.0, cpu=500),
        JobSpec("j7", "q0", gpu=3, cpu=8_000, running_on=["n3"], created=7.0),
        JobSpec("j8", "q0", gpu=1, created=8.0, cpu=500),
        JobSpec(
            "j9",
            "q0",
            pods=4,
            fraction=0.5,
            running_on=["n2", "n2", "n2", "n3"],
            gpu_groups=["n2-shared0", "n2-shared0", "n2-shared1", "n3-shared0"],
            created=9.0,
            cpu=500,
        ),
        JobSpec("j10", "q0", pods=3, min_member=2, gpu=3, cpu=8_000, priority=75, created=10.0),
    ]
    snapshot = build(nodes, [queue("q0")], jobs)
    first = comparable(cycle(snapshot).decisions)
    assert first[0]["default/j10-2"].reason.startswith("Resources were found for 1 pods while 2 are required")
    for seed in range(10):
        assert comparable(cycle(shuffled(snapshot, random.Random(seed))).decisions) == first
