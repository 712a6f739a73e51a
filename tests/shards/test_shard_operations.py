"""One shard under any interleaving of two-phase commit, expiry and cluster deltas.

Hypothesis drives a plain ``Shard`` through random sequences of: prepare (random placements,
some impossible, and placements a session would pick), commit, abort, the clock moving past
reservation TTLs, expiry, node add / update / remove, and pod deltas (a pod placed by someone
else, terminating, removed, a bind confirmed, a bind failed, a pipelined pod binding).

After every step two things are checked:

1. **No node is over-committed** (invariant 1 of docs/architecture.md#invariants), by the definitions in
   ``tests/shards/recount.py``: recounted from the shard's live holdings and the nodes'
   allocatable, every column of ``idle`` (active + releasing must fit) and of ``future``
   (active + pipelined must fit) is >= 0, whole GPUs and shared GPUs included, and no shared
   GPU's memory is exceeded; the shard's own sums and views equal that recount.
   The shard is the only allocator here, so deltas are those a real cluster could report: a
   delta that would itself over-commit a node (a kubelet would have rejected the pod) is
   dropped before it reaches the shard. Prepare gets no such help.
2. **Each reservation resolves exactly once** (invariant 3): a model of the expected states
   predicts every answer of prepare, commit, abort and expire; once COMMITTED, ABORTED or
   EXPIRED a reservation never changes; a refused prepare holds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kai_ray.model import PodState
from placement.holdings import Kind
from placement.placer import share_mib
from shards.messages import Placement, PrepareItem, ShardDeltas
from shards.shard import Shard
from tests.shards.catalog import ASKS, NODE_KINDS, Ask, Held, make_node, make_pod, placement, placement_of
from tests.shards.recount import shard_problems, would_overcommit
from tests.shards.table_snapshot import table_state, unchanged

TTL = 10.0
NAMES = ("n0", "n1", "n2", "n3", "n4")
KIND_OF = {PodState.RUNNING: Kind.ACTIVE, PodState.BINDING: Kind.ACTIVE, PodState.RELEASING: Kind.RELEASING}
STARTING_STATES = st.sampled_from((PodState.RUNNING, PodState.RELEASING))
PREPARED, COMMITTED, ABORTED, EXPIRED = "prepared", "committed", "aborted", "expired"


@dataclass(slots=True)
class Expected:
    state: str
    deadline: float
    holds: list[Held] = field(default_factory=list)


class ShardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.shard = Shard(0, reservation_ttl=TTL)
        self.now = 0.0
        self.hardware: dict[str, str] = {}  # node -> kind; a name keeps its hardware when re-added
        self.present: set[str] = set()
        self.pods: dict[str, Held] = {}
        self.reservations: dict[str, Expected] = {}
        self.serial = 0

    def _next(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _apply_if_possible(self, deltas: ShardDeltas) -> bool:
        """Apply deltas a real cluster could report: ones that do not over-commit a node by themselves."""
        if would_overcommit(self.shard, deltas):
            event("delta dropped")
            return False
        self.shard.apply(deltas)
        return True

    # ------------------------------------------------------------------ node deltas
    @initialize(
        data=st.data(),
        kinds=st.lists(st.sampled_from(sorted(NODE_KINDS)), min_size=1, max_size=3),
        pods=st.lists(st.tuples(st.sampled_from(ASKS), STARTING_STATES), max_size=6),
    )
    def start_with_a_busy_cluster(
        self, data: st.DataObject, kinds: list[str], pods: list[tuple[Ask, PodState]]
    ) -> None:
        for name, kind in zip(NAMES, kinds, strict=False):
            self.add_node(name, kind)
        for ask, state in pods:
            self.pod_placed_elsewhere(data, ask, state)

    @rule(name=st.sampled_from(NAMES), kind=st.sampled_from(sorted(NODE_KINDS)))
    def add_node(self, name: str, kind: str) -> None:
        kind = self.hardware.setdefault(name, kind)
        table = self.shard.table
        rows_before, grows = len(table), name not in table.index and not table.free_rows
        if self._apply_if_possible(ShardDeltas(nodes_upserted=(make_node(name, kind),))):
            self.present.add(name)
            assert len(self.shard.table) == rows_before + grows  # a removed node's row is reused first

    @precondition(lambda self: self.hardware)
    @rule(data=st.data(), scale=st.sampled_from((0.5, 1.0, 1.5)), ready=st.booleans(), zone=st.sampled_from("ab"))
    def update_node(self, data: st.DataObject, scale: float, ready: bool, zone: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.hardware)))
        node = make_node(name, self.hardware[name], scale, ready, zone)
        if self._apply_if_possible(ShardDeltas(nodes_upserted=(node,))):
            self.present.add(name)

    @precondition(lambda self: self.present)
    @rule(data=st.data())
    def remove_node(self, data: st.DataObject) -> None:
        """The node's pods go with it, and a reservation holding capacity there is aborted."""
        name = data.draw(st.sampled_from(sorted(self.present)))
        rows_before = len(self.shard.table)
        self.shard.apply(ShardDeltas(nodes_removed=(name,)))
        self.present.discard(name)
        for key in [k for k, held in self.pods.items() if held.node == name]:
            del self.pods[key]
        for expected in self.reservations.values():
            if expected.state == PREPARED and any(h.node == name for h in expected.holds):
                expected.state = ABORTED
                event("a reservation aborted with its node")
        assert len(self.shard.table) == rows_before and name not in self.shard.table.index

    # ------------------------------------------------------------------ pod deltas
    def _groups_for(self, data: st.DataObject, node: str, ask: Ask, prefix: str, join: bool = False) -> tuple[str, ...]:
        """Shared GPUs for a fraction: existing ones on the node (always, with ``join``) or new ones."""
        if ask.share is None:
            return ()
        row = self.shard.table.index.get(node)
        existing = [] if row is None else sorted(self.shard.table.groups[row])
        chosen: list[str] = []
        for _ in range(ask.share.devices):
            options = [g for g in existing if g not in chosen]
            if options and (join or data.draw(st.booleans())):
                chosen.append(data.draw(st.sampled_from(options)))
            else:
                chosen.append(self._next(f"{node}-{prefix}"))
        return tuple(chosen)

    @precondition(lambda self: self.hardware)
    @rule(
        data=st.data(),
        ask=st.sampled_from(ASKS),
        state=st.sampled_from((PodState.RUNNING, PodState.BINDING, PodState.RELEASING)),
    )
    def pod_placed_elsewhere(self, data: st.DataObject, ask: Ask, state: PodState) -> None:
        """A pod the shard did not place shows up on a node (another scheduler, or before a restart)."""
        node = data.draw(st.sampled_from(sorted(self.hardware)))
        key = self._next("default/x")
        groups = self._groups_for(data, node, ask, "ext")
        applied = self._apply_if_possible(ShardDeltas(pods_upserted=(make_pod(key, ask, state, node, groups),)))
        if applied and node in self.present:  # a pod on a node the shard does not have holds nothing
            self.pods[key] = Held(key, ask, node, KIND_OF[state], groups)

    def _pods_of_kind(self, kind: Kind) -> list[str]:
        return sorted(k for k, held in self.pods.items() if held.kind is kind)

    @precondition(lambda self: self._pods_of_kind(Kind.ACTIVE))
    @rule(data=st.data())
    def pod_terminating(self, data: st.DataObject) -> None:
        held = self.pods[data.draw(st.sampled_from(self._pods_of_kind(Kind.ACTIVE)))]
        self.shard.apply(
            ShardDeltas(pods_upserted=(make_pod(held.key, held.ask, PodState.RELEASING, held.node, held.groups),))
        )
        self.pods[held.key] = Held(held.key, held.ask, held.node, Kind.RELEASING, held.groups)

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def pod_removed(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.pods)))
        self.shard.apply(ShardDeltas(pods_removed=(key,)))
        del self.pods[key]

    @precondition(lambda self: self._pods_of_kind(Kind.ACTIVE))
    @rule(data=st.data())
    def bind_confirmed(self, data: st.DataObject) -> None:
        """The watch reports the pod running where the shard already holds it: nothing changes."""
        held = self.pods[data.draw(st.sampled_from(self._pods_of_kind(Kind.ACTIVE)))]
        before = table_state(self.shard)
        self.shard.apply(
            ShardDeltas(pods_upserted=(make_pod(held.key, held.ask, PodState.RUNNING, held.node, held.groups),))
        )
        assert unchanged(before, table_state(self.shard))

    @precondition(lambda self: self._pods_of_kind(Kind.ACTIVE))
    @rule(data=st.data())
    def bind_failed(self, data: st.DataObject) -> None:
        held = self.pods[data.draw(st.sampled_from(self._pods_of_kind(Kind.ACTIVE)))]
        self.shard.apply(ShardDeltas(pods_upserted=(make_pod(held.key, held.ask, PodState.PENDING, None),)))
        del self.pods[held.key]

    @precondition(lambda self: self._pods_of_kind(Kind.PIPELINED))
    @rule(data=st.data())
    def pipelined_pod_binds(self, data: st.DataObject) -> None:
        """The releasing pods are gone (or not yet: then the cluster cannot report it)."""
        held = self.pods[data.draw(st.sampled_from(self._pods_of_kind(Kind.PIPELINED)))]
        pod = make_pod(held.key, held.ask, PodState.BINDING, held.node, held.groups)
        if self._apply_if_possible(ShardDeltas(pods_upserted=(pod,))):
            self.pods[held.key] = Held(held.key, held.ask, held.node, Kind.ACTIVE, held.groups)

    # ------------------------------------------------------------------ two-phase commit
    def _placement(
        self, data: st.DataObject, node: str, ask: Ask | None = None, join: bool = False
    ) -> tuple[Placement, Held]:
        ask = ask or data.draw(st.sampled_from(ASKS))
        pipelined = data.draw(st.booleans())
        key = self._next("default/p")
        groups = self._groups_for(data, node, ask, "gpu-new", join)
        row = self.shard.table.index.get(node)
        device = np.array([self.shard.table.gpu_mem[row] if row is not None else 100])
        mib = int(share_mib(ask.share, device)[0]) if ask.share else 0
        taken = set(self.shard.table.groups[row]) if row is not None else set()
        create = tuple(g for g in groups if g not in taken)
        chosen = placement(key, ask, node, pipelined, tuple((g, mib) for g in groups), create)
        return chosen, Held(key, ask, node, Kind.PIPELINED if pipelined else Kind.ACTIVE, groups)

    @rule(data=st.data(), sizes=st.lists(st.integers(1, 3), min_size=1, max_size=2))
    def prepare_any(self, data: st.DataObject, sizes: list[int]) -> None:
        """Placements a coordinator with a stale view might send: many will not fit."""
        nodes = st.sampled_from(sorted(self.hardware) * 5 + ["ghost"])  # now and then a node nobody has
        items, holds = [], {}
        for size in sizes:
            rid = self._next("r")
            chosen = [self._placement(data, data.draw(nodes)) for _ in range(size)]
            items.append(PrepareItem(rid, tuple(p for p, _ in chosen)))
            holds[rid] = [h for _, h in chosen]
        self._prepare(items, holds)

    def _prepare_one(self, data: st.DataObject, node: str, ask: Ask | None = None, join: bool = False) -> None:
        rid = self._next("r")
        chosen, held = self._placement(data, node, ask, join)
        self._prepare([PrepareItem(rid, (chosen,))], {rid: [held]})

    @precondition(lambda self: self._pods_of_kind(Kind.RELEASING))
    @rule(data=st.data())
    def prepare_on_releasing_capacity(self, data: st.DataObject) -> None:
        """What a releasing pod holds, asked for on its node: only a pipelined pod may have it."""
        releasing = self.pods[data.draw(st.sampled_from(self._pods_of_kind(Kind.RELEASING)))]
        self._prepare_one(data, releasing.node, releasing.ask, join=True)

    @precondition(lambda self: any(self.shard.table.groups))
    @rule(data=st.data(), ask=st.sampled_from([a for a in ASKS if a.share]))
    def prepare_on_shared_gpu(self, data: st.DataObject, ask: Ask) -> None:
        """A fraction joining GPUs that are already shared: their memory may run out."""
        table = self.shard.table
        node = data.draw(st.sampled_from([table.names[r] for r, groups in enumerate(table.groups) if groups]))
        self._prepare_one(data, node, ask, join=True)

    @rule(ask=st.sampled_from(ASKS))
    def prepare_best(self, ask: Ask) -> None:
        """A placement a session would pick (best node, its GPU groups), then sent to prepare."""
        choice = self.shard.placer.best_node(ask.shape)
        if choice is None:
            return
        node, key, rid = self.shard.table.names[choice.node], self._next("default/p"), self._next("r")
        kind = Kind.PIPELINED if choice.pipelined else Kind.ACTIVE
        held = Held(key, ask, node, kind, tuple(g for g, _ in choice.shares))
        self._prepare([PrepareItem(rid, (placement_of(key, ask, node, choice),))], {rid: [held]})

    @precondition(lambda self: self.reservations)
    @rule(data=st.data())
    def prepare_again(self, data: st.DataObject) -> None:
        """A retried prepare: held again if still prepared (nothing held twice), else refused."""
        rid = data.draw(st.sampled_from(sorted(self.reservations)))
        node = data.draw(st.sampled_from(sorted(self.hardware)))
        chosen, _ = self._placement(data, node)
        self._prepare([PrepareItem(rid, (chosen,))], {})

    def _prepare(self, items: list[PrepareItem], holds: dict[str, list[Held]]) -> None:
        expiring = self._expected_to_expire()
        before = table_state(self.shard)
        reply = self.shard.prepare(items, self.now)
        self._mark_expired(expiring)
        assert set(reply.held) | set(reply.refused) == {i.rid for i in items}
        assert not set(reply.held) & set(reply.refused)
        for item in items:
            event(
                "prepare held"
                if item.rid in reply.held
                else "prepare refused: " + reply.refused[item.rid].split(": ")[-1].split(" for pod")[0]
            )
            known = self.reservations.get(item.rid)
            if known is not None:
                assert (item.rid in reply.held) == (known.state == PREPARED), (item.rid, known.state, reply)
            elif item.rid in reply.held:
                self.reservations[item.rid] = Expected(PREPARED, self.now + TTL, holds[item.rid])
            else:
                assert self.shard.reservation_state(item.rid) is None
        if not reply.held and not expiring:  # a refused prepare (and a retry) holds nothing
            assert unchanged(before, table_state(self.shard))

    def _rids(self, data: st.DataObject) -> list[str]:
        known = st.sampled_from(sorted(self.reservations) + ["never-prepared"])
        return data.draw(st.lists(known, min_size=1, max_size=4, unique=True))

    @precondition(lambda self: self.reservations)
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        rids = self._rids(data)
        answers = self.shard.commit(rids, self.now)
        for rid in rids:
            expected = self.reservations.get(rid)
            if expected is None:
                assert answers[rid] is False
                continue
            if expected.state == PREPARED and expected.deadline < self.now:
                expected.state = EXPIRED  # a commit after the deadline finds the capacity given back
                event("commit after the deadline")
            if expected.state == PREPARED:
                expected.state = COMMITTED
                for held in expected.holds:
                    self.pods[held.key] = held
            assert answers[rid] is (expected.state == COMMITTED), (rid, expected.state)

    @precondition(lambda self: self.reservations)
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        rids = self._rids(data)
        answers = self.shard.abort(rids)
        for rid in rids:
            expected = self.reservations.get(rid)
            if expected is not None and expected.state == PREPARED:
                expected.state = ABORTED
            assert answers[rid] is (expected is None or expected.state != COMMITTED), rid

    @rule(seconds=st.sampled_from((0.0, 1.0, 4.0, 11.0)))
    def clock_moves(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def expire(self) -> None:
        expiring = self._expected_to_expire()
        held_before = self.shard.table.held.copy()
        freed = np.zeros_like(held_before)
        for rid in expiring:
            reservation = self.shard.book.get(rid)
            assert reservation is not None
            for holding in reservation.holdings:
                freed[holding.kind, holding.node] += holding.vector
        assert sorted(self.shard.expire(self.now)) == sorted(expiring)
        self._mark_expired(expiring)
        assert np.allclose(self.shard.table.held, held_before - freed, rtol=0, atol=1e-6)  # capacity returns

    def _expected_to_expire(self) -> list[str]:
        return [rid for rid, r in self.reservations.items() if r.state == PREPARED and r.deadline < self.now]

    def _mark_expired(self, rids: list[str]) -> None:
        for rid in rids:
            self.reservations[rid].state = EXPIRED

    # ------------------------------------------------------------------ invariants
    @invariant()
    def no_node_is_overcommitted(self) -> None:
        problems = shard_problems(self.shard)
        assert not problems, problems
        held = self.shard.table.held
        if np.any((held[Kind.RELEASING].sum(axis=1) > 0) & (held[Kind.PIPELINED].sum(axis=1) > 0)):
            event("a node with releasing and pipelined pods")
        if any(u.pipelined and (u.releasing or u.active) for row in self.shard.table.groups for u in row.values()):
            event("a shared GPU with pipelined and other fractions")

    @invariant()
    def holdings_are_what_the_model_expects(self) -> None:
        names = self.shard.table.names
        placed = {k: (names[h.node], h.kind) for k, h in self.shard.pods.items()}
        assert placed == {k: (h.node, h.kind) for k, h in self.pods.items()}
        for rid, expected in self.reservations.items():
            assert self.shard.reservation_state(rid) == expected.state, rid
            if expected.state == PREPARED:
                reservation = self.shard.book.get(rid)
                assert reservation is not None
                actual = sorted((h.pod, names[h.node], h.kind) for h in reservation.holdings)
                assert actual == sorted((h.key, h.node, h.kind) for h in expected.holds)


ShardMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestShardOperations = ShardMachine.TestCase
