"""The coordinator's side of "shards place, the coordinator arbitrates" (docs/architecture.md).

Allocate walks the jobs in KAI's order as always; where a pod needs a node it takes the next
placement of its shape from ``RoundPlacer``. That placement comes from the shards: in one
round every shard places, for every shape still wanted, as many pods as could be needed, and
holds them; their streams, merged by score and node name, are exactly the order a session
scanning every node would place pods of that shape in. Taking pods from several shapes'
streams in any interleaving is exact as long as the shards saw no interaction between those
shapes; a shape whose stream may have been changed by another's is re-placed in a new round
(the pods taken so far stay held, the rest is released first) the moment it is needed. A job
that is rolled back gives its placements back, and a job the session pipelines after all has
its held pods turned into pipelined ones in the next round.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from coordinator.shard_client import Answers
from coordinator.shard_set import ShardSet
from placement.diagnosis import Diagnosis
from placement.shapes import TaskShape
from shards.stream_messages import (
    Binds,
    RoundReply,
    RoundRequest,
    SettleReply,
    SettleRequest,
    ShapeStream,
    Shares,
    Taken,
)
from shards.wire import pack_positions, pack_shapes

Check = Callable[[Answers[RoundReply], str], dict[int, RoundReply]]
# When shapes change one another's streams, each round for one of them re-places every pod still
# wanted, so a backlog of sizes that share nodes and take turns in the job order would cost
# rounds times backlog. Once the pods re-placed that way reach this share of the cluster's nodes,
# allocate moves onto every node's row instead, which costs about a pass over the nodes; a few
# pods of two sizes, as most cycles have, stay on the streams.
REPLACED_PODS_PER_NODE = 0.25


@dataclass(slots=True)
class Pick:
    """One pod's place: the node, and where it sits in its shard's stream of that shape."""

    shape: TaskShape
    node: str
    pipelined: bool
    shard: int
    position: int
    gpu_mem: float
    generation: int  # the round it came from
    shares: Shares = ()
    create: tuple[str, ...] = ()


@dataclass(slots=True)
class _Buffer:
    """One shape's placements from one round, merged over the shards in the global order."""

    generation: int
    names: list[str]
    counts: list[int]
    pipelined: list[bool]
    shards: list[int]
    gpu_mem: list[float]
    shares: list[tuple[Shares, tuple[str, ...]]]
    complete: bool  # every shard placed all it could: nothing more of this shape fits anywhere
    valid: bool = True
    entry: int = 0
    offset: int = 0  # pods taken from the current entry

    def exhausted(self) -> bool:
        return self.entry >= len(self.names)


def pending_demand(pods: Iterable[tuple[str, TaskShape]]) -> Counter[TaskShape]:
    """Pending pods (key, shape) counted per shape, the shapes in the order of each one's first pod
    by key. Each round places the shapes one on top of another in this order, which decides when
    the session leaves the streams for every node's row, and so what the shards then say of a pod
    that fits nowhere: the order the cluster listed its pods in must not change that."""
    counts: Counter[TaskShape] = Counter()
    first: dict[TaskShape, str] = {}
    for key, shape in pods:
        counts[shape] += 1
        if key < first.setdefault(shape, key):
            first[shape] = key
    return Counter({shape: counts[shape] for shape in sorted(first, key=first.__getitem__)})


@dataclass(slots=True)
class RoundPlacer:
    shards: ShardSet
    proposal: str
    clock: Callable[[], float]  # the cycle's time now: each round renews the shards' holds from it
    demand: Counter[TaskShape]  # pending pods per shape: nobody can take more
    check: Check
    buffers: dict[TaskShape, _Buffer] = field(default_factory=dict)
    taken: Counter[tuple[int, TaskShape]] = field(default_factory=Counter)  # (shard, shape) -> pods taken
    pipelined: dict[tuple[int, TaskShape], set[int]] = field(default_factory=dict)  # positions turned pipelined
    nodes: int = 0  # in the cluster: what moving onto every node's row costs
    rounds: int = 0
    replaced: int = 0  # pods re-placed for shapes whose streams another shape's placements had changed
    generation: int = 0
    table: tuple[TaskShape, ...] = ()  # the cycle's shapes; messages name a shape by its place here
    packed: bytes = b""
    where: dict[TaskShape, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.table = tuple(self.demand)
        self.packed = pack_shapes(self.table)
        self.where = {shape: i for i, shape in enumerate(self.table)}

    # ------------------------------------------------------------------ taking
    def take(self, shape: TaskShape) -> Pick | None:
        """The next place for a pod of ``shape`` in the global order; None when none is left."""
        buffer = self.buffers.get(shape)
        if buffer is None or not buffer.valid or (buffer.exhausted() and not buffer.complete):
            self._round(shape, replacing=buffer is not None and not buffer.valid)
            buffer = self.buffers[shape]
        if buffer.exhausted():
            return None
        i = buffer.entry
        sid = buffer.shards[i]
        key = (sid, shape)
        shares, create = buffer.shares[i] if buffer.shares else ((), ())
        pick = Pick(
            shape,
            buffer.names[i],
            buffer.pipelined[i],
            sid,
            self.taken[key],
            buffer.gpu_mem[i],
            buffer.generation,
            shares,
            create,
        )
        self.taken[key] += 1
        buffer.offset += 1
        if buffer.offset == buffer.counts[i]:
            buffer.entry, buffer.offset = i + 1, 0
        return pick

    def interfering(self) -> bool:
        """Whether the shapes' streams kept changing one another this cycle, so that placing on
        every node's row (one copy of the rows, then pod by pod) is the cheaper way on."""
        return self.replaced > 0 and self.replaced >= REPLACED_PODS_PER_NODE * self.nodes

    def give_back(self, pick: Pick) -> None:
        """Undo the latest ``take`` of this shape (rollbacks undo in reverse order)."""
        key = (pick.shard, pick.shape)
        self.taken[key] -= 1
        buffer = self.buffers.get(pick.shape)
        if buffer is None or buffer.generation != pick.generation:
            if buffer is not None:  # its stream was placed after this pod: it no longer lines up
                buffer.valid = False
            return
        if buffer.offset == 0:
            buffer.entry -= 1
            buffer.offset = buffer.counts[buffer.entry]
        buffer.offset -= 1

    def pipeline(self, pick: Pick, pipelined: bool = True) -> None:
        """The session pipelines a pod it had placed on free capacity: the shard must hold it as
        waiting for releasing capacity, and the freed capacity may change every stream."""
        marks = self.pipelined.setdefault((pick.shard, pick.shape), set())
        if pipelined:
            marks.add(pick.position)
        else:
            marks.discard(pick.position)
        for buffer in self.buffers.values():
            buffer.valid = False

    # ------------------------------------------------------------------ rounds
    def _left(self, shape: TaskShape) -> int:
        return self.demand[shape] - sum(n for (_, s), n in self.taken.items() if s == shape)

    def _round(self, first: TaskShape, replacing: bool = False) -> None:
        """Every shard releases what was not taken and places what is still wanted, ``first``
        first (its stream is then exact whatever the others do); ``replacing``: because another
        shape's placements changed ``first``'s stream."""
        self.rounds += 1
        self.generation += 1
        shapes = [first] + [s for s in self.table if s != first and self._left(s) > 0]
        place = np.array([self.where[s] for s in shapes], dtype=np.int64)
        wanted = np.array([max(self._left(s), 0) for s in shapes], dtype=np.int64)
        if replacing:
            self.replaced += int(wanted.sum())
        now = self.clock()
        requests = {sid: RoundRequest(self.proposal, now, self._taken(sid), place, wanted) for sid in self.shards.ids}
        replies = self.check(self.shards.rounds(requests), "place")
        invalid: set[int] = set()
        for reply in replies.values():
            invalid.update(reply.conflicts[:, 1].tolist())
        for i, shape in enumerate(shapes):
            parts = [(sid, replies[sid].streams[i]) for sid in sorted(replies)]
            self.buffers[shape] = _merge(parts, self.generation, valid=i not in invalid)

    def _taken(self, sid: int, diagnose: tuple[TaskShape, ...] = ()) -> Taken:
        keep = np.zeros(len(self.table), dtype=np.int64)
        for (s, shape), n in self.taken.items():
            if s == sid:
                keep[self.where[shape]] = n
        marks = {self.where[shape]: sorted(p) for (s, shape), p in self.pipelined.items() if s == sid and p}
        wanted = np.array([self.where[s] for s in diagnose], dtype=np.int64)
        return Taken(self.packed, keep, pack_positions(marks) if marks else b"", wanted)

    # ------------------------------------------------------------------ settling
    def settle(
        self, binds: dict[int, list[tuple[str, str, TaskShape, int]]], diagnose: tuple[TaskShape, ...], now: float
    ) -> Answers[SettleReply]:
        """One round: every shard keeps what was taken, diagnoses, commits its binds (pod, rid,
        shape, position; if ``now`` is still within the holds' deadline), and releases the rest."""
        requests = {
            sid: SettleRequest(self.proposal, now, self._taken(sid, diagnose), self._binds(binds.get(sid, [])))
            for sid in self.shards.ids
        }
        return self.shards.settle_all(requests)

    def _binds(self, binds: list[tuple[str, str, TaskShape, int]]) -> Binds:
        if not binds:
            return Binds.empty()
        rids: dict[str, int] = {}
        pods, rid, shape, position = [], [], [], []
        for pod, reservation, pod_shape, pod_position in binds:
            pods.append(pod)
            rid.append(rids.setdefault(reservation, len(rids)))
            shape.append(self.where[pod_shape])
            position.append(pod_position)
        return Binds(
            np.array(pods, dtype=np.str_),
            tuple(rids),
            np.array(rid, dtype=np.int64),
            np.array(shape, dtype=np.int64),
            np.array(position, dtype=np.int64),
        )

    def sync_request(self, sid: int, diagnose: tuple[TaskShape, ...]) -> RoundRequest:
        """Keep what was taken and release the rest, placing nothing (before the shards' rows are
        mirrored for the actions that look at every node)."""
        return RoundRequest(self.proposal, self.clock(), self._taken(sid, diagnose))


def _merge(parts: list[tuple[int, ShapeStream]], generation: int, valid: bool) -> _Buffer:
    """The shards' streams of one shape in the global order. Each step of a session scanning
    every node takes the best node anywhere; a shard's stream is the order of its own best
    nodes, so the global order takes, each time, the best of the shards' next entries (score,
    then node name). Where every stream is itself sorted by that key (bin-packing whole GPUs or
    CPU), that is one sort of all entries; fractions can raise a node's score as they land on it
    (a shared GPU), so their streams are merged head by head."""
    names: npt.NDArray[np.str_] = np.concatenate([p.names for _, p in parts]) if parts else np.zeros(0, np.str_)
    band = np.concatenate([p.band for _, p in parts]) if parts else np.zeros(0)
    placement = np.concatenate([p.placement for _, p in parts]) if parts else np.zeros(0)
    if not len(names):
        order = np.zeros(0, dtype=np.int64)
    elif all(_sorted(p) for _, p in parts):
        order = np.lexsort((names, -placement, -band))
    else:
        order = _heads_merge(parts)
    shards = np.concatenate([np.full(len(p), sid) for sid, p in parts]) if parts else np.zeros(0, np.int64)
    counts = np.concatenate([p.counts for _, p in parts]) if parts else np.zeros(0, np.int64)
    pipelined = np.concatenate([p.pipelined for _, p in parts]) if parts else np.zeros(0, bool)
    gpu_mem = np.concatenate([p.gpu_mem for _, p in parts]) if parts else np.zeros(0, np.int64)
    shares = [s for _, p in parts for s in p.share_list()]
    return _Buffer(
        generation,
        names[order].tolist(),
        counts[order].tolist(),
        pipelined[order].tolist(),
        shards[order].tolist(),
        gpu_mem[order].astype(float).tolist(),
        [shares[i] for i in order.tolist()] if shares else [],
        all(p.complete for _, p in parts),
        valid,
    )


def _sorted(stream: ShapeStream) -> bool:
    """Whether the stream's entries never get better as it goes on (band, placement, name)."""
    if len(stream) < 2:
        return True
    band, placement = stream.band, stream.placement
    worse = (band[1:] < band[:-1]) | ((band[1:] == band[:-1]) & (placement[1:] < placement[:-1]))
    same = (band[1:] == band[:-1]) & (placement[1:] == placement[:-1])
    later_name = same & (stream.names[1:] >= stream.names[:-1])
    return bool(np.all(worse | later_name))


def _heads_merge(parts: list[tuple[int, ShapeStream]]) -> npt.NDArray[np.int64]:
    """Indexes into the concatenated entries, each time the best of the streams' next entries."""
    offsets = np.cumsum([0] + [len(p) for _, p in parts])
    heap: list[tuple[float, float, str, int, int]] = []
    for k, (_, part) in enumerate(parts):
        if len(part):
            heapq.heappush(heap, (-float(part.band[0]), -float(part.placement[0]), str(part.names[0]), k, 0))
    order = []
    while heap:
        _, _, _, k, i = heapq.heappop(heap)
        order.append(int(offsets[k]) + i)
        part = parts[k][1]
        if i + 1 < len(part):
            j = i + 1
            heapq.heappush(heap, (-float(part.band[j]), -float(part.placement[j]), str(part.names[j]), k, j))
    return np.array(order, dtype=np.int64)


def merged_diagnoses(replies: dict[int, dict[TaskShape, Diagnosis]]) -> dict[TaskShape, Diagnosis]:
    out: dict[TaskShape, Diagnosis] = {}
    for sid in sorted(replies):
        for shape, diagnosis in replies[sid].items():
            known = out.get(shape)
            out[shape] = diagnosis if known is None else known.merged(diagnosis)
    return out
