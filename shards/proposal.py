"""A shard places pods and holds them: one cycle's proposal ("place and hold", docs/architecture.md).

For each shape it is asked for, the shard fills its own nodes in the exact order a session
would place those pods one by one: the best node first (its per-shape index), and on that node
as many pods as keep it the best, found with one slot count instead of one search per pod
(bin-packing keeps filling a node while it stays in the same score band; spreading moves on
after each pod). What it places it holds at once, so placing and preparing are one round.

Shapes are placed one after the other, each on top of the holds of the ones before, and the
shard reports which of them may interact: a node two shapes both use, or a node one shape
used that another could have wanted (feasible for it at the start and, judged by the best
score it could reach on it while it still fits, not clearly worse than everything that shape
took). A row the round left holding one pod, with no room for the other shape, is either as it
was at the start or out of that shape's reach, so its start score is the best it could reach;
with more pods held, a partly taken row may be fuller and better. Shapes that do not interact
may be taken in any interleaving; the coordinator re-places the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from placement.holdings import Holding, Kind, Vector
from placement.node_table import NodeTable
from placement.placer import Placer
from placement.shapes import GPU, PODS, TaskShape
from shards.stream_messages import Binds, Ints, ShapeStream, Shares
from shards.wire import pack_shares

TOLERANCE = 1e-6
Score = tuple[float, float]


@dataclass(slots=True)
class HeldEntry:
    """``count`` pods of one shape held on one row as one holding (a fraction: one pod)."""

    row: int
    kind: Kind
    count: int
    vector: Vector  # one pod's
    holding: Holding  # of all ``count`` pods
    shares: Shares = ()
    create: tuple[str, ...] = ()


@dataclass(slots=True)
class Proposal:
    pid: str
    deadline: float
    streams: dict[TaskShape, list[HeldEntry]] = field(default_factory=dict)

    def holdings(self) -> list[Holding]:
        return [e.holding for entries in self.streams.values() for e in entries]

    def holdings_entries(self) -> list[HeldEntry]:
        return [e for entries in self.streams.values() for e in entries]


class ProposalKeeper:
    """Places, holds, releases and commits the pods of a proposal on one table."""

    def __init__(self, table: NodeTable, placer: Placer) -> None:
        self.table = table
        self.placer = placer

    # ------------------------------------------------------------------ releasing
    def release_all(self, proposal: Proposal) -> None:
        for entries in proposal.streams.values():
            for entry in reversed(entries):
                self.table.release(entry.holding)
        proposal.streams.clear()

    def keep(self, proposal: Proposal, keep: dict[TaskShape, int]) -> None:
        """Release every held pod beyond the first ``keep[shape]`` of each stream."""
        for shape in list(proposal.streams):
            entries = proposal.streams[shape]
            left = keep.get(shape, 0)
            kept: list[HeldEntry] = []
            for entry in entries:
                if left >= entry.count:
                    kept.append(entry)
                    left -= entry.count
                elif left > 0:
                    kept.append(self._shrink(entry, left))
                    left = 0
                else:
                    self.table.release(entry.holding)
            if kept:
                proposal.streams[shape] = kept
            else:
                del proposal.streams[shape]

    def _shrink(self, entry: HeldEntry, count: int) -> HeldEntry:
        """The first ``count`` pods of ``entry`` stay held, the others return."""
        table = self.table
        holding = table.hold("", entry.row, entry.kind, entry.vector * count, entry.shares, entry.create)
        table.release(entry.holding)
        return HeldEntry(entry.row, entry.kind, count, entry.vector, holding, entry.shares, entry.create)

    def pipeline(self, proposal: Proposal, positions: dict[TaskShape, tuple[int, ...]]) -> None:
        """Held pods that the session pipelined after all: they wait for releasing capacity."""
        for shape, wanted in positions.items():
            entries = proposal.streams.get(shape, [])
            marks = set(wanted)
            out: list[HeldEntry] = []
            start = 0
            for entry in entries:
                picked = [p - start for p in range(start, start + entry.count) if p in marks]
                start += entry.count
                if not picked or entry.kind is Kind.PIPELINED:
                    out.append(entry)
                    continue
                out.extend(self._split(entry, set(picked)))
            proposal.streams[shape] = out

    def _split(self, entry: HeldEntry, pipelined: set[int]) -> list[HeldEntry]:
        """``entry`` as one-pod entries, the ones at ``pipelined`` held as pipelined pods."""
        table = self.table
        pieces = []
        for i in range(entry.count):
            kind = Kind.PIPELINED if i in pipelined else entry.kind
            holding = table.hold("", entry.row, kind, entry.vector.copy(), entry.shares, entry.create)
            pieces.append(HeldEntry(entry.row, kind, 1, entry.vector, holding, entry.shares, entry.create))
        table.release(entry.holding)
        return pieces

    # ------------------------------------------------------------------ placing
    def place(
        self, proposal: Proposal, shapes: tuple[TaskShape, ...], wanted: tuple[int, ...]
    ) -> tuple[list[ShapeStream], list[tuple[int, int]]]:
        """Place and hold up to ``wanted[i]`` more pods of ``shapes[i]``, in that order; the
        streams, and the pairs of shapes whose streams may interact."""
        watch = _Watch(self.placer, shapes)
        streams = []
        for i, (shape, count) in enumerate(zip(shapes, wanted, strict=True)):
            streams.append(self._place_shape(proposal, shape, count, i, watch))
        return streams, watch.conflicts(streams)

    def _place_shape(self, proposal: Proposal, shape: TaskShape, wanted: int, me: int, watch: _Watch) -> ShapeStream:
        placer, table = self.placer, self.table
        index = placer.index(shape)
        held = proposal.streams.setdefault(shape, [])
        names: list[str] = []
        counts: list[int] = []
        bands: list[float] = []
        placements: list[float] = []
        pipelined: list[bool] = []
        shares: list[tuple[Shares, tuple[str, ...]]] = []
        placed, complete = 0, False
        vector = table.schema.vector(shape.request)
        if shape.share is not None:
            vector[GPU] = 0.0
        while placed < wanted:
            row = index.best()
            if row is None:
                complete = True
                break
            now, _, mib = placer.fit_row(shape, row)
            band, placement = placer.rank_row(shape, row, now, mib)
            watch.touch(row, me)
            if shape.share is not None:
                choice = placer.choose_on(row, shape, False)
                count, entry_shares, create = 1, choice.shares, choice.create
                kind = Kind.PIPELINED if choice.pipelined else Kind.ACTIVE
            else:
                count = self._run_length(shape, row, now, wanted - placed)
                kind, entry_shares, create = Kind.ACTIVE if now else Kind.PIPELINED, (), ()
            holding = table.hold("", row, kind, vector * count, entry_shares, create)
            held.append(HeldEntry(row, kind, count, vector, holding, entry_shares, create))
            names.append(table.names[row])
            counts.append(count)
            bands.append(band)
            placements.append(placement)
            pipelined.append(kind is Kind.PIPELINED)
            if shape.share is not None:
                shares.append((entry_shares, create))
            watch.score(me, (band, placement))
            watch.held(row, count)
            placed += count
        if not held:
            del proposal.streams[shape]
        rows = [table.index[n] for n in names]
        return ShapeStream(
            np.array(names, dtype=np.str_),
            np.array(counts, dtype=np.int64),
            np.array(bands, dtype=np.float64),
            np.array(placements, dtype=np.float64),
            np.array(pipelined, dtype=bool),
            table.gpu_mem[rows].astype(np.int64) if rows else np.zeros(0, dtype=np.int64),
            pack_shares(shares) if shares else b"",
            complete,
        )

    def _run_length(self, shape: TaskShape, row: int, now: bool, limit: int) -> int:
        """How many pods of ``shape`` in a row go to ``row`` while it stays the best node: with
        bin-packing, every pod it takes makes it a better fit, so all that fit in the same band
        (now, or only once releasing pods are gone); with spreading, one."""
        if self.placer.policy_of(shape) == "spread":
            return 1
        table = self.table
        request = self.placer.request_list(shape)
        caps = [table.future[row].tolist()]
        if now:
            caps.append(table.idle[row].tolist())
        count = limit
        for cap in caps:
            count = min(count, math.floor(cap[PODS] + TOLERANCE))
            for amount, free in zip(request, cap, strict=True):
                if amount > TOLERANCE:
                    count = min(count, math.floor((free + TOLERANCE) / amount))
        return max(count, 1)

    # ------------------------------------------------------------------ committing
    def _rows_of(self, proposal: Proposal, table: tuple[TaskShape, ...], binds: Binds) -> Ints:
        """The row each bind's pod is held on (-1: no such pod in the stream)."""
        rows = np.full(len(binds), -1, dtype=np.int64)
        # A set, not ``np.unique``: numpy's (2.x) imports its masked arrays on first use, which a
        # one-shot ``kai-ray schedule`` paid for on every run.
        for index in sorted(set(binds.shape.tolist())):
            entries = proposal.streams.get(table[index])
            if not entries:
                continue
            mine = np.flatnonzero(binds.shape == index)
            positions = binds.position[mine]
            bounds = np.cumsum([e.count for e in entries])
            entry = np.searchsorted(bounds, positions, side="right")
            valid = (positions >= 0) & (entry < len(entries))
            entry_rows = np.array([e.row for e in entries], dtype=np.int64)
            rows[mine[valid]] = entry_rows[entry[valid]]
        return rows

    def overrun(self, proposal: Proposal, table: tuple[TaskShape, ...], binds: Binds) -> set[str]:
        """The reservations (rids) of binds onto a node that went over its capacity since the
        pods were held (a pod of another scheduler landed there), or of pods the proposal does
        not hold: binding them would over-commit. Deficits the held pods do not add to are not theirs."""
        rows = self._rows_of(proposal, table, binds)
        ours: dict[int, tuple[Vector, set[str]]] = {}
        for entry in proposal.holdings_entries():
            if entry.kind is Kind.ACTIVE:
                amount, groups = ours.setdefault(entry.row, (np.zeros(self.table.schema.width), set()))
                amount += entry.vector * entry.count
                groups.update(g for g, _ in entry.shares)
        bad = {row for row in set(rows.tolist()) if row < 0 or (row in ours and self._overrun(row, *ours[row]))}
        return {binds.rids[r] for r, row in zip(binds.rid.tolist(), rows.tolist(), strict=True) if row in bad}

    def _overrun(self, row: int, ours: Vector, groups: set[str]) -> bool:
        table = self.table
        short = (table.idle[row] < -TOLERANCE) | (table.future[row] < -TOLERANCE)
        if bool(np.any(short & (ours > TOLERANCE))):
            return True
        device = int(table.gpu_mem[row])
        for gid in groups:
            usage = table.groups[row].get(gid)
            if usage is not None and max(usage.active + usage.pipelined, usage.active + usage.releasing) > device:
                return True
        return False

    def commit(
        self,
        proposal: Proposal,
        table: tuple[TaskShape, ...],
        binds: Binds,
        refused: set[str],
        pods: dict[str, Holding],
    ) -> None:
        """The bound pods become the shard's pods (their capacity stays held, now in their own
        names); every other pod of the proposal is released."""
        wanted: dict[TaskShape, dict[int, str]] = {}
        rids = binds.rids
        for pod, rid, shape, position in zip(
            binds.pods.tolist(), binds.rid.tolist(), binds.shape.tolist(), binds.position.tolist(), strict=True
        ):
            if rids[rid] not in refused:
                wanted.setdefault(table[shape], {})[position] = pod
        for shape, entries in proposal.streams.items():
            keys = wanted.get(shape, {})
            start = 0
            for entry in entries:
                mine = [keys[p] for p in range(start, start + entry.count) if p in keys] if keys else []
                start += entry.count
                if not mine or entry.kind is not Kind.ACTIVE:
                    self.table.release(entry.holding)
                    continue
                if len(mine) < entry.count:
                    entry = self._shrink(entry, len(mine))  # only so many of its pods stay
                row, vector, shares, create = entry.row, entry.vector, entry.shares, entry.create
                for pod in mine:
                    pods[pod] = Holding(pod, row, Kind.ACTIVE, vector, shares, create)
        proposal.streams.clear()


class _Watch:
    """Which shapes of a round may interact (see the module's docstring)."""

    def __init__(self, placer: Placer, shapes: tuple[TaskShape, ...]) -> None:
        self.placer = placer
        self.shapes = shapes
        self.touched: dict[int, set[int]] = {}  # row -> shapes that placed pods on it
        self.start: dict[int, list[tuple[bool, Score]]] = {}  # row -> per shape: feasible, score, before
        self.worst: dict[int, Score] = {}  # shape -> the lowest score among its entries
        self.pods: dict[int, int] = {}  # row -> pods the round holds on it

    def touch(self, row: int, shape: int) -> None:
        if row not in self.start and len(self.shapes) > 1:
            placer = self.placer
            gpus = placer.table.gpu_count[row] > 0
            before: list[tuple[bool, Score]] = []
            for other in self.shapes:
                # Cheap verdicts first: a node the shape may not use, or a GPU shape on a CPU node.
                if (other.needs_gpu_devices and not gpus) or not placer.masks.admitted(other.constraints)[row]:
                    before.append((False, (0.0, 0.0)))
                    continue
                now, future, mib = placer.fit_row(other, row)
                before.append((future, placer.rank_row(other, row, now, mib) if future else (0.0, 0.0)))
            self.start[row] = before
        self.touched.setdefault(row, set()).add(shape)

    def held(self, row: int, count: int) -> None:
        self.pods[row] = self.pods.get(row, 0) + count

    def score(self, shape: int, score: Score) -> None:
        worst = self.worst.get(shape)
        if worst is None or score < worst:
            self.worst[shape] = score

    def conflicts(self, streams: list[ShapeStream]) -> list[tuple[int, int]]:
        pairs: set[tuple[int, int]] = set()
        if len(self.shapes) < 2:
            return []
        placer = self.placer
        for row, users in self.touched.items():
            ordered = sorted(users)
            pairs.update((a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :])
            for s, shape in enumerate(self.shapes):
                if s in users:
                    continue
                feasible, (band, placement) = self.start[row][s]
                if not feasible:
                    continue  # holds only take capacity away: it stays out of reach
                if shape.share is not None and any(self.shapes[u].share is not None for u in users):
                    pairs.update((min(s, u), max(s, u)) for u in users)  # a new shared GPU can raise its band
                    continue
                if placer.policy_of(shape) == "binpack":  # fuller is better: judge it as full as it got
                    now, future, mib = placer.fit_row(shape, row)
                    # With one pod held there, the row is as it was at the start or, with that pod,
                    # out of this shape's reach: no fuller state it could use, the start's score stands.
                    if future or self.pods[row] > 1:
                        placement = placer.rank_row(shape, row, now, mib)[1]
                worst = self.worst.get(s)
                if streams[s].complete or worst is None or (band, placement) >= worst:
                    pairs.update((min(s, u), max(s, u)) for u in users)
        return sorted(pairs)
