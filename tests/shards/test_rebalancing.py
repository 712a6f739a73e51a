"""Rebalancing: nodes move between shards with everything on them.

Hypothesis drives a ``ShardSet`` over ``InProcessTransport`` through cluster deltas, two-phase
commits routed by node owner (so a reservation may span shards), the clock passing TTLs,
expiry, and ``resize(n)`` between random shard counts. Checked:

- Across every resize, the cluster seen node by node is exactly the same: allocatable, labels,
  what active / releasing / pipelined pods hold, ``idle`` and ``future``, shared GPUs, and the
  live holdings on the node with the reservation (and deadline) each belongs to. Columns are
  compared by name, since shards learn extended resources at different times.
- Every node is present on exactly one shard, the one ``partitioner.owner`` names, resize
  moves exactly the nodes ``partitioner.moves`` says, and each shard's placement (its cached
  filters and per-shape indexes) then chooses what a full scan of its nodes chooses.
- After every step each shard passes the recount checks of ``tests/shards/recount.py`` (no
  over-commit, its sums equal a recount of its live holdings), and the live holdings across
  all shards are the ones a model of pods and reservations expects.
- A reservation prepared before a move can be committed (its pods then sit on the shard that
  owns their node now) or aborted (its capacity returns) after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from kai_ray.deltas import ClusterDeltas
from kai_ray.model import PodState
from loadtests.baseline import FullScanPlacer
from placement.holdings import Kind
from placement.placer import share_mib
from shards import partitioner
from shards.messages import PrepareItem, ShardDeltas
from shards.shard import Shard
from tests.shards.catalog import ASKS, NODE_KINDS, Ask, Held, make_node, make_pod, placement
from tests.shards.recount import live_holdings, recount, shard_problems, would_overcommit

TTL = 10.0
NAMES = tuple(f"n{i}" for i in range(10))
KIND_OF = {PodState.RUNNING: Kind.ACTIVE, PodState.RELEASING: Kind.RELEASING}
PREPARED, COMMITTED, ABORTED, EXPIRED = "prepared", "committed", "aborted", "expired"
Amounts = tuple[tuple[str, float], ...]


@dataclass(slots=True)
class Expected:
    """A reservation across shards. While it is past its deadline but not expired everywhere,
    shards that ran expiry (a prepare there) say EXPIRED and the others PREPARED."""

    deadline: float
    holds: list[Held]
    states: set[str] = field(default_factory=lambda: {PREPARED})
    prepared_before_move: bool = False


def by_name(columns: list[str], values: object) -> Amounts:
    return tuple(sorted((c, float(v)) for c, v in zip(columns, values, strict=True) if v))  # type: ignore[call-overload]


def cluster_state(shards: dict[int, Shard], unsettled: set[str]) -> tuple[dict[str, object], list[str]]:
    """Each present node's full state, and the names present on more than one shard.

    What a node holds is recounted from its live holdings (``every_shard_recounts`` checks that
    the shard's own sums agree), leaving out reservations in ``unsettled``: ones past their
    deadline that some shards expired already. A part of such a reservation that moves onto a
    shard where it has expired is released there, as that shard's answer for it says."""
    nodes: dict[str, object] = {}
    duplicated = []
    for shard in shards.values():
        table = shard.table
        columns = ["cpu", "memory", "gpu", "pods", *table.schema.scalars]
        kept = [
            *((("pod", 0.0), h) for h in shard.pods.values()),
            *(((r.rid, r.deadline), h) for r in shard.book.prepared() if r.rid not in unsettled for h in r.holdings),
        ]
        counted = recount(table, [h for _, h in kept])
        live: dict[int, list[tuple[object, ...]]] = {}
        for (holder, deadline), h in kept:
            live.setdefault(h.node, []).append(
                (
                    holder,
                    deadline,
                    h.pod,
                    int(h.kind),
                    by_name(columns, h.vector),
                    tuple(sorted(h.shares)),
                    tuple(sorted(h.created_groups)),
                )
            )
        for row, name in enumerate(table.names):
            if not table.present[row]:
                continue
            if name in nodes:
                duplicated.append(name)
            nodes[name] = (
                by_name(columns, table.alloc[row]),
                [by_name(columns, counted.held[k, row]) for k in Kind],
                by_name(columns, counted.idle[row]),
                by_name(columns, counted.future[row]),
                {g: (*mib, table.groups[row][g].owns_slot) for g, mib in counted.groups[row].items()},
                table.labels[row],
                table.taints[row],
                bool(table.ready[row]),
                bool(table.unschedulable[row]),
                int(table.gpu_mem[row]),
                sorted(live.get(row, []), key=repr),
            )
    return nodes, duplicated


class RebalancingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.backend = InProcessTransport([Shard(0, reservation_ttl=TTL)])
        self.shard_set = ShardSet(self.backend)
        self.now = 0.0
        self.hardware: dict[str, str] = {}
        self.present: set[str] = set()
        self.pods: dict[str, Held] = {}
        self.reservations: dict[str, Expected] = {}
        self.serial = 0

    def _next(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _apply(self, deltas: ClusterDeltas) -> None:
        """Changes reach the shards with the next request; this machine looks at them right away."""
        self.shard_set.apply(deltas)
        self.shard_set.flush()

    def _owner(self, node: str) -> Shard:
        return self.backend.shards[self.shard_set.owner[node]]

    # ------------------------------------------------------------------ cluster deltas
    @initialize(count=st.integers(1, 4), kinds=st.lists(st.sampled_from(sorted(NODE_KINDS)), min_size=2, max_size=8))
    def start(self, count: int, kinds: list[str]) -> None:
        self.shard_set.resize(count)
        for name, kind in zip(NAMES, kinds, strict=False):
            self.add_node(name, kind)

    @rule(name=st.sampled_from(NAMES), kind=st.sampled_from(sorted(NODE_KINDS)))
    def add_node(self, name: str, kind: str) -> None:
        if name in self.present:
            return
        kind = self.hardware.setdefault(name, kind)
        self._apply(ClusterDeltas(nodes_upserted=(make_node(name, kind),)))
        self.present.add(name)

    def _removable(self) -> list[str]:
        """Nodes no open reservation holds anything on (a coordinator commits right after it prepares,
        before any further cluster change, so a gang is never committed onto a node that has gone)."""
        reserved = {h.node for e in self.reservations.values() if PREPARED in e.states for h in e.holds}
        return sorted(self.present - reserved)

    @precondition(lambda self: self._removable())
    @rule(data=st.data(), pods_deleted_at_once=st.booleans())
    def remove_node(self, data: st.DataObject, pods_deleted_at_once: bool) -> None:
        """The node is deleted; Kubernetes deletes its pods too, in the same batch or a later one."""
        name = data.draw(st.sampled_from(self._removable()))
        pods = tuple(sorted(k for k, h in self.pods.items() if h.node == name))
        self._apply(ClusterDeltas(nodes_removed=(name,), pods_removed=pods if pods_deleted_at_once else ()))
        if not pods_deleted_at_once:
            self._apply(ClusterDeltas(pods_removed=pods))
        self.present.discard(name)
        for key in pods:
            del self.pods[key]

    @precondition(lambda self: self.present)
    @rule(data=st.data(), scale=st.sampled_from((0.5, 1.0, 1.5)), zone=st.sampled_from("ab"))
    def update_node(self, data: st.DataObject, scale: float, zone: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.present)))
        node = make_node(name, self.hardware[name], scale, zone=zone)
        if not would_overcommit(self._owner(name), ShardDeltas(nodes_upserted=(node,))):
            self._apply(ClusterDeltas(nodes_upserted=(node,)))

    @precondition(lambda self: self.present)
    @rule(data=st.data(), ask=st.sampled_from(ASKS), state=st.sampled_from(sorted(KIND_OF)))
    def pod_placed_elsewhere(self, data: st.DataObject, ask: Ask, state: PodState) -> None:
        node = data.draw(st.sampled_from(sorted(self.present)))
        key = self._next("default/x")
        groups = tuple(self._next(f"{node}-ext") for _ in range(ask.share.devices if ask.share else 0))
        pod = make_pod(key, ask, state, node, groups)
        if not would_overcommit(self._owner(node), ShardDeltas(pods_upserted=(pod,))):
            self._apply(ClusterDeltas(pods_upserted=(pod,)))
            self.pods[key] = Held(key, ask, node, KIND_OF[state], groups)

    def _pods_on_present_nodes(self, kind: Kind | None = None) -> list[str]:
        return sorted(k for k, h in self.pods.items() if h.node in self.present and kind in (None, h.kind))

    @precondition(lambda self: self._pods_on_present_nodes(Kind.ACTIVE))
    @rule(data=st.data())
    def pod_terminating(self, data: st.DataObject) -> None:
        held = self.pods[data.draw(st.sampled_from(self._pods_on_present_nodes(Kind.ACTIVE)))]
        pod = make_pod(held.key, held.ask, PodState.RELEASING, held.node, held.groups)
        self._apply(ClusterDeltas(pods_upserted=(pod,)))
        self.pods[held.key] = Held(held.key, held.ask, held.node, Kind.RELEASING, held.groups)

    @precondition(lambda self: self._pods_on_present_nodes())
    @rule(data=st.data())
    def pod_removed(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self._pods_on_present_nodes()))
        self._apply(ClusterDeltas(pods_removed=(key,)))
        del self.pods[key]

    # ------------------------------------------------------------------ two-phase commit
    @precondition(lambda self: self.present)
    @rule(data=st.data(), size=st.integers(1, 3))
    def prepare(self, data: st.DataObject, size: int) -> None:
        """A gang whose pods may land on different shards; any refusal aborts it everywhere."""
        rid = self._next("r")
        per_shard: dict[int, list[PrepareItem]] = {}
        holds = []
        for _ in range(size):
            ask, node = self._ask_and_node(data)
            pipelined = data.draw(st.booleans())
            shard = self._owner(node)
            device = shard.table.gpu_mem[shard.table.index[node] :][:1]
            mib = int(share_mib(ask.share, device)[0]) if ask.share else 0
            groups = tuple(self._next(f"{node}-new") for _ in range(ask.share.devices if ask.share else 0))
            key = self._next("default/p")
            chosen = placement(key, ask, node, pipelined, tuple((g, mib) for g in groups), groups)
            items = per_shard.setdefault(self.shard_set.owner[node], [PrepareItem(rid, ())])
            items[0] = PrepareItem(rid, (*items[0].placements, chosen))
            holds.append(Held(key, ask, node, Kind.PIPELINED if pipelined else Kind.ACTIVE, groups))
        self._expiry_may_run(set(per_shard))
        replies = self.shard_set.prepare(per_shard, self.now).replies
        if all(rid in reply.held for reply in replies.values()):
            self.reservations[rid] = Expected(self.now + TTL, holds)
            event("prepared across shards" if len(per_shard) > 1 else "prepared on one shard")
        else:
            for reply in replies.values():
                for why in reply.refused.values():
                    event("refused: " + why.split(": ")[-1].split(" for pod")[0])
            self.shard_set.abort([rid])
            self.reservations[rid] = Expected(self.now + TTL, holds, {ABORTED})

    def _ask_and_node(self, data: st.DataObject) -> tuple[Ask, str]:
        """A pod and where one shard's placer would put it (as a session would), or else a node
        whose hardware suits it (its current load may not)."""
        ask = data.draw(st.sampled_from(ASKS))
        shard = self.backend.shards[data.draw(st.sampled_from(self.shard_set.ids))]
        choice = shard.placer.best_node(ask.shape)
        if choice is not None and data.draw(st.booleans()):
            return ask, shard.table.names[choice.node]
        node = data.draw(st.sampled_from(sorted(self.present)))
        hardware = NODE_KINDS[self.hardware[node]]
        suits = [
            a
            for a in ASKS
            if a.gpu <= hardware.gpu
            and (hardware.gpu or not a.share)
            and all(hardware.scalars.get(name, 0) >= amount for name, amount in a.scalars)
        ]
        return data.draw(st.sampled_from(suits)), node

    @rule(data=st.data())
    def prepare_on_another_shard(self, data: st.DataObject) -> None:
        """A prepare for some other gang reaches only one shard: expiry runs there and nowhere else."""
        sid = data.draw(st.sampled_from(self.shard_set.ids))
        self._expiry_may_run({sid})
        self.shard_set.prepare({sid: []}, self.now)

    def _expiry_may_run(self, shard_ids: set[int]) -> None:
        """Prepare expires what is due, but only on the shards it is sent to."""
        for expected in self.reservations.values():
            if PREPARED in expected.states and expected.deadline < self.now:
                expected.states = {PREPARED, EXPIRED} if len(shard_ids) < len(self.shard_set.ids) else {EXPIRED}

    def _open(self) -> list[str]:
        return sorted(r for r, e in self.reservations.items() if e.states == {PREPARED})

    @precondition(lambda self: self._open())
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self._open()))
        expected = self.reservations[rid]
        if expected.prepared_before_move:
            event("committed after a move")
        holding = [sid for sid, shard in self.backend.shards.items() if shard.reservation_state(rid) is not None]
        answers = self.shard_set.commit([rid], self.now, holding)
        if expected.deadline < self.now:  # too late: every part expires instead, nothing is committed
            event("commit after the deadline")
            assert not any(answers.replies[sid][rid] for sid in holding), answers
            expected.states = {EXPIRED}
            return
        assert all(answers.replies[sid][rid] for sid in holding), answers
        self.shard_set.record_placed({h.key: h.node for h in expected.holds})
        expected.states = {COMMITTED}
        for held in expected.holds:
            self.pods[held.key] = held
            if held.node in self.present:  # the pod sits on the shard that owns its node now
                shard = self._owner(held.node)
                assert shard.table.names[shard.pods[held.key].node] == held.node

    @precondition(lambda self: self.reservations)
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.reservations)))
        expected = self.reservations[rid]
        if expected.prepared_before_move and expected.states == {PREPARED}:
            event("aborted after a move")
        self.shard_set.abort([rid])
        if PREPARED in expected.states:
            expected.states = (expected.states - {PREPARED}) | {ABORTED}

    @rule(seconds=st.sampled_from((1.0, 6.0, 11.0)))
    def clock_moves(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def expire(self) -> None:
        self._expiry_may_run(set(self.shard_set.ids))
        self.shard_set.expire(self.now)

    # ------------------------------------------------------------------ rebalancing
    @rule(count=st.integers(1, 5))
    def resize(self, count: int) -> None:
        unsettled = {rid for rid, e in self.reservations.items() if e.states == {PREPARED, EXPIRED}}
        if unsettled:
            event("resized while a reservation had expired on some shards only")
        before, _ = cluster_state(self.backend.shards, unsettled)
        expected_moves = partitioner.moves(sorted(self.present), self.shard_set.ids, list(range(count)))
        moved = self.shard_set.resize(count)
        after, duplicated = cluster_state(self.backend.shards, unsettled)
        assert not duplicated, duplicated
        assert moved == len(expected_moves)
        assert sorted(before) == sorted(after) == sorted(self.present)  # no node lost or added
        for name in sorted(before):
            assert before[name] == after[name], name
        for name in self.present:
            assert self.shard_set.owner[name] == partitioner.owner(name, list(range(count)))
        for shard in self.backend.shards.values():  # moved nodes are visible to placement where they are now
            full_scan = FullScanPlacer(shard.table, shard.placer.policy)
            for ask in (ASKS[0], ASKS[1], ASKS[5]):  # cpu only; a whole GPU; a fraction with a selector
                assert shard.placer.best_node(ask.shape) == full_scan.best_node(ask.shape), ask
        for expected in self.reservations.values():
            expected.prepared_before_move = expected.prepared_before_move or moved > 0

    # ------------------------------------------------------------------ invariants
    @invariant()
    def every_shard_recounts(self) -> None:
        for sid, shard in self.backend.shards.items():
            problems = shard_problems(shard)
            assert not problems, (sid, problems)

    @invariant()
    def every_node_is_on_its_owners_shard(self) -> None:
        present = [(sid, n) for sid, s in self.backend.shards.items() for n in s.node_names()]
        assert sorted(n for _, n in present) == sorted(self.present)  # none lost, none on two shards
        assert all(self.shard_set.owner[n] == sid for sid, n in present)

    @invariant()
    def holdings_are_what_the_model_expects(self) -> None:
        pods, prepared = {}, {}
        states: dict[str, set[str]] = {}
        for shard in self.backend.shards.values():
            names = shard.table.names
            pods.update({k: (names[h.node], h.kind) for k, h in shard.pods.items()})
            for rid in self.reservations:
                state = shard.reservation_state(rid)
                if state is not None:
                    states.setdefault(rid, set()).add(state)
            for reservation in shard.book.prepared():
                for h in reservation.holdings:
                    prepared[h.pod] = (reservation.rid, names[h.node], h.kind)
        assert pods == {k: (h.node, h.kind) for k, h in self.pods.items()}
        for rid, expected in self.reservations.items():
            assert states.get(rid, set()) <= expected.states, (rid, states.get(rid), expected.states)
            if expected.states == {PREPARED}:  # every hold is live, on some shard
                assert all(prepared.get(h.key) == (rid, h.node, h.kind) for h in expected.holds), rid
            elif PREPARED not in expected.states:
                assert not any(h.key in prepared for h in expected.holds), rid
        assert sum(len(live_holdings(s)) for s in self.backend.shards.values()) == len(pods) + len(prepared)


RebalancingMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestRebalancing = RebalancingMachine.TestCase
