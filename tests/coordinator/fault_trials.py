"""Seeded fault trials: a coordinator over several shards loses one at a random point of a cycle.

A trial is a small GPU cluster fed over a dozen cycles: gangs (1 GPU a pod, all-or-nothing),
single-GPU and CPU-only jobs arrive every cycle, bound pods are confirmed running by a
simulated watch and some finish again, and a new 8-GPU node joins halfway. One shard dies at
a seeded round of the trial, either before its batch arrives (the batch is lost) or after it
handled it (the answer is lost). What the trial records, and the tests assert:

- no pod is bound twice, and no gang is bound in part;
- no node is over-committed by what was bound (recounted from the binds alone);
- no cluster change is lost: at the end every shard holds exactly what a fresh shard loaded
  from the coordinator's model would hold;
- binding resumes: how many cycles after the failed one passed until pods were bound again;
- given a reference coordinator that loses nothing, fed the same changes, every cycle after the
  failure decides as it does (binds, pod and pod group decisions); the reference skips the cycle
  that failed, which bound nothing.

``FaultyTransport`` kills in-process shards; the Ray tests kill real shard actors through the
same trial with their own transport.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coordinator.coordinator import Coordinator, CoordinatorLost, CycleResult, ShardsFailed
from coordinator.replaceable import CoordinatorHost, HostGone, ReplaceableCoordinator
from coordinator.shard_client import InProcessTransport, ShardTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import Node, Pod, PodGroup, PodState, ResourceVector
from kai_ray.model.records import with_changes
from placement.placer import PlacementPolicy
from shards.protocol import Batch, BatchReply, ShardDown
from shards.shard import Shard
from tests.builders import GIB, config, node, queue

CYCLES = 12
ACTIONS = ("allocate",)
NOW = 1_000.0


@dataclass(frozen=True, slots=True)
class Kill:
    round: int  # the transport round (1, 2, ...) at which the shard dies
    shard: int
    after_delivery: bool  # it handled the batch, then died before answering


class FaultyTransport(InProcessTransport):
    """In-process shards, one of which dies at a chosen round: it stops answering (its state is
    gone) until the coordinator replaces it."""

    def __init__(self, shards: list[Shard], kill: Kill | None) -> None:
        super().__init__(shards)
        self.kill = kill
        self.rounds = 0
        self.dead: set[int] = set()
        self.fired = False

    def exchange(self, batches: Mapping[int, Batch]) -> dict[int, BatchReply | ShardDown]:
        self.rounds += 1
        out: dict[int, BatchReply | ShardDown] = {}
        for sid, batch in batches.items():
            if sid in self.dead:
                out[sid] = ShardDown(sid, "killed")
                continue
            kill = self.kill
            if kill is not None and not self.fired and self.rounds >= kill.round and sid == kill.shard:
                self.fired = True
                self.dead.add(sid)
                if kill.after_delivery:
                    self.shards[sid].handle(batch)
                del self.shards[sid]  # its state dies with it
                out[sid] = ShardDown(sid, "killed")
                continue
            out.update(super().exchange({sid: batch}))
        return out

    def replace(self, shard_id: int) -> None:
        super().replace(shard_id)
        self.dead.discard(shard_id)


@dataclass
class TrialReport:
    failed_cycles: list[int] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    bound_twice: list[str] = field(default_factory=list)
    partial_gangs: list[str] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    lost_deltas: list[str] = field(default_factory=list)  # shards whose state differs from the model
    never_sent: list[str] = field(default_factory=list)  # pods the model takes as bound that no cycle handed out
    resumed_after: list[int] = field(default_factory=list)  # cycles from a failure until binds again
    differed: list[int] = field(default_factory=list)  # cycles that decided otherwise than the reference
    recovered: list[tuple[int, int]] = field(default_factory=list)  # (coordinator cycle, shard) rebuilt
    binds: int = 0
    pending_left: int = 0
    bound: dict[str, str] = field(default_factory=dict)  # pod -> node, as the results bound them


@dataclass
class _Job:
    group: PodGroup
    pods: list[Pod]


def _jobs(rng: random.Random, cycle: int, count: int) -> list[_Job]:
    jobs = []
    for j in range(count):
        name = f"c{cycle}-j{j}"
        kind = rng.choice(("gang", "gang", "gpu", "cpu"))
        size = rng.randint(2, 4) if kind == "gang" else 1
        team = rng.choice(("team-a", "team-b"))
        group = PodGroup("default", name, team, 50, True, min_member=size, created=cycle * 100 + j, uid=f"pg-{name}")
        gpu = 0 if kind == "cpu" else 1
        requests = ResourceVector.of(cpu=2_000 if gpu else 1_000, memory=8 * GIB, gpu=gpu, pods=1)
        pods = [
            Pod(
                "default",
                f"{name}-{i}",
                uid=f"uid-{name}-{i}",
                requests=requests,
                created=cycle * 100 + j,
                pod_group=name,
                queue_label=team,
            )
            for i in range(size)
        ]
        jobs.append(_Job(group, pods))
    return jobs


def shard_trial(
    seed: int,
    make_transport: Callable[[], ShardTransport],
    shards_on: Callable[[], dict[int, Shard]],
    reference: Coordinator | None = None,
) -> TrialReport:
    """One trial of a coordinator over ``make_transport()``'s shards; ``shards_on`` gives the live
    shard objects for the final comparison (empty when they live in actors: then the shards
    describe themselves instead). ``reference``: see ``run_trial``."""
    coordinator = Coordinator(config(), ShardSet(make_transport()))
    report = run_trial(seed, coordinator, reference)
    report.recovered = list(coordinator.recovered)
    report.lost_deltas = _lost_deltas(coordinator, shards_on())
    report.never_sent = sorted(key for key in coordinator.model.assumed if key not in report.bound)
    return report


def run_trial(
    seed: int, coordinator: Coordinator | ReplaceableCoordinator, reference: Coordinator | None = None
) -> TrialReport:
    """A dozen cycles of changes into ``coordinator``, recording what its results bind; with a
    ``reference``, the cycles whose decisions differ from it."""
    rng = random.Random(seed)
    nodes = [node(f"n{i:02d}", gpu=rng.choice((4, 8)), cpu=32_000, memory=256 * GIB, pods=24) for i in range(10)]
    late = node("n-late", gpu=8, cpu=32_000, memory=256 * GIB, pods=24)
    queues = (queue("team-a", gpu_quota=20), queue("team-b", gpu_quota=20))
    first = ClusterDeltas(nodes_upserted=tuple(nodes), queues_upserted=queues)
    _apply(coordinator, first, report := TrialReport())
    if reference is not None:
        reference.apply(first)
    truth: dict[str, Pod] = {}
    groups: dict[str, PodGroup] = {}
    bound: dict[str, str] = {}
    allocatable = {n.name: n.allocatable for n in [*nodes, late]}
    for cycle in range(CYCLES):
        changes = _changes(rng, cycle, truth, groups, bound, late)
        if reference is not None:
            reference.apply(changes)
        try:
            _apply(coordinator, changes, report)
            result = coordinator.cycle(NOW + cycle, ACTIONS)
        except ShardsFailed as failure:
            report.failed_cycles.append(cycle)
            report.phases.append(failure.phase)
            continue
        except CoordinatorLost as lost:
            assert lost.replaced
            report.failed_cycles.append(cycle)
            report.phases.append("cycle")
            continue
        if reference is not None and _decided(result) != _decided(reference.cycle(NOW + cycle, ACTIONS)):
            report.differed.append(cycle)
        per_job: Counter[str] = Counter()
        for bind in result.binds:
            if bind.pod in bound:
                report.bound_twice.append(bind.pod)
            bound[bind.pod] = bind.node
            pod = truth[bind.pod]
            truth[bind.pod] = with_changes(pod, state=PodState.RUNNING, node=bind.node)
            per_job[f"default/{pod.pod_group}"] += 1
        report.binds += len(result.binds)
        for job in per_job:
            members = [p for p in truth.values() if f"default/{p.pod_group}" == job]
            if sum(1 for p in members if p.key in bound) < groups[job].min_member:
                report.partial_gangs.append(job)
        if result.binds and report.failed_cycles and len(report.resumed_after) < len(report.failed_cycles):
            report.resumed_after.append(cycle - report.failed_cycles[-1])
        report.overcommitted.extend(_overcommitted(truth, allocatable))
    report.bound = bound
    report.pending_left = sum(1 for p in truth.values() if p.state is PodState.PENDING)
    return report


def _decided(result: CycleResult) -> tuple[object, ...]:
    """What a cycle decided, as two coordinators over the same cluster must agree on."""
    binds = sorted((bind.pod, bind.node, bind.gpu_groups) for bind in result.binds)
    return binds, result.decisions.pods, result.decisions.pod_groups


def _apply(coordinator: Coordinator | ReplaceableCoordinator, changes: ClusterDeltas, report: TrialReport) -> None:
    try:
        coordinator.apply(changes)
    except CoordinatorLost as lost:  # replaced: the new one has these changes
        assert lost.replaced
        report.phases.append("apply")


def _changes(
    rng: random.Random,
    cycle: int,
    truth: dict[str, Pod],
    groups: dict[str, PodGroup],
    bound: dict[str, str],
    late: Node,
) -> ClusterDeltas:
    """This cycle's cluster changes: the watch confirms last cycle's binds, some single-pod jobs
    finish, new jobs arrive, and halfway through a new node joins."""
    confirmed = tuple(p for k, p in truth.items() if k in bound and p.state is PodState.RUNNING)
    finished = [
        k for k, p in truth.items() if p.state is PodState.RUNNING and groups[f"default/{p.pod_group}"].min_member == 1
    ]
    gone = tuple(rng.sample(sorted(finished), min(len(finished), rng.randint(0, 2))))
    for key in gone:
        del truth[key]
    arrivals = _jobs(rng, cycle, rng.randint(2, 5))
    for job in arrivals:
        groups[job.group.key] = job.group
        truth.update({p.key: p for p in job.pods})
    return ClusterDeltas(
        nodes_upserted=(late,) if cycle == CYCLES // 2 else (),
        pods_upserted=tuple(p for p in confirmed if p.key not in gone) + tuple(p for j in arrivals for p in j.pods),
        pods_removed=gone,
        pod_groups_upserted=tuple(j.group for j in arrivals),
    )


def _overcommitted(truth: dict[str, Pod], allocatable: dict[str, ResourceVector]) -> list[str]:
    used: dict[str, np.ndarray] = {}
    for pod in truth.values():
        if pod.state is PodState.RUNNING and pod.node is not None:
            r = pod.requests
            used[pod.node] = used.get(pod.node, np.zeros(4)) + (r.cpu, r.memory, r.gpu, r.pods)
    out = []
    for name, amount in used.items():
        a = allocatable[name]
        if np.any(amount > np.array((a.cpu, a.memory, a.gpu, a.pods)) + 1e-6):
            out.append(name)
    return out


def _lost_deltas(coordinator: Coordinator, live: dict[int, Shard]) -> list[str]:
    """Shards whose nodes and pods differ from what the coordinator's model says they own."""
    shards = coordinator.shards
    shards.flush()
    problems = []
    for sid in shards.ids:
        names = sorted(n for n, owner in shards.owner.items() if owner == sid)
        expected = Shard(sid)
        expected.load(
            tuple(coordinator.model.nodes[n] for n in names),
            tuple(p for p in coordinator.model.pods.values() if p.node in set(names)),
        )
        if sid in live:
            if _contents(live[sid]) != _contents(expected):
                problems.append(f"shard {sid}")
        else:
            info = coordinator.shard_info()[sid]
            if (info.nodes, info.pods, info.open_reservations) != (len(names), len(expected.pods), 0):
                problems.append(f"shard {sid}: {info}")
    return problems


def _contents(shard: Shard) -> tuple[object, ...]:
    table = shard.table
    rows = {
        table.names[r]: (table.alloc[r].tolist(), table.held[:, r].tolist(), sorted(table.groups[r]))
        for r in np.flatnonzero(table.present)
    }
    pods = {k: (table.names[h.node], int(h.kind), h.vector.tolist()) for k, h in shard.pods.items()}
    return rows, pods, len(shard.book.prepared())


def in_process(seed: int, shards: int = 4) -> TrialReport:
    """A trial over in-process shards with one killed at a seeded round."""
    rng = random.Random(seed * 7919 + 1)
    kill = Kill(round=rng.randint(1, 2 * CYCLES), shard=rng.randrange(shards), after_delivery=rng.random() < 0.5)
    policy = PlacementPolicy.of(config())
    transport = FaultyTransport([Shard(i, policy) for i in range(shards)], kill)
    report = shard_trial(seed, lambda: transport, lambda: transport.shards)
    if not transport.fired:
        report.phases.append("never fired")
    return report


# ---------------------------------------------------------------- the coordinator itself dies


class DyingHostLink:
    """A ``HostLink`` to a coordinator host in this process (over in-process shards) that dies at
    its ``dies_at``-th call: before running it, or after (the reply is lost). A dead host never
    answers again; its state goes with it."""

    def __init__(self, shards: int, dies_at: int | None, after_running: bool) -> None:
        policy = PlacementPolicy.of(config())
        self.host: CoordinatorHost | None = CoordinatorHost(
            Coordinator(config(), ShardSet(InProcessTransport([Shard(i, policy) for i in range(shards)])))
        )
        self.dies_at, self.after_running = dies_at, after_running
        self.calls = 0

    def call(self, method: str, *args: Any) -> Any:
        self.calls += 1
        if self.host is None:
            raise HostGone("dead")
        if self.calls == self.dies_at:
            if self.after_running:
                getattr(self.host, method)(*args)
            self.host = None
            raise HostGone(f"killed at call {self.calls} ({method}, {'after' if self.after_running else 'before'})")
        return getattr(self.host, method)(*args)

    def close(self) -> None:
        self.host = None


def coordinator_killed(seed: int, shards: int = 2) -> TrialReport:
    """A trial whose coordinator host dies at a seeded call (of the trial's first host), before
    or after running it; ``ReplaceableCoordinator`` starts a new one from what it kept."""
    rng = random.Random(seed * 104_729 + 3)
    links: list[DyingHostLink] = []

    def start(count: int) -> DyingHostLink:
        first = not links
        # Calls: the first apply, then an apply and a cycle per cycle; the last cycle is spared (a
        # cycle must follow to show binding resume).
        link = DyingHostLink(count, rng.randint(1, 2 * CYCLES - 1) if first else None, rng.random() < 0.5)
        links.append(link)
        return link

    coordinator = ReplaceableCoordinator(start, shards)
    report = run_trial(seed, coordinator)
    final = links[-1].host
    assert final is not None
    report.lost_deltas = _lost_deltas(final.coordinator, {})
    model, kept = final.coordinator.model, coordinator.model
    for key in sorted(model.pods.keys() | kept.pods.keys()):
        theirs, ours = model.pods.get(key), kept.pods.get(key)
        if (theirs and (theirs.state, theirs.node)) != (ours and (ours.state, ours.node)):
            report.lost_deltas.append(f"{key}: the coordinator has {theirs}, the caller kept {ours}")
    report.never_sent = sorted(key for key in kept.assumed if key not in report.bound)
    if len(links) == 1:
        report.phases.append("never fired")
    return report
