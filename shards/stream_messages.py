"""What the coordinator and a shard say to each other while shards place pods (docs/architecture.md).

One cycle's placement is a *proposal*: in each round the shard places, for every pod shape the
coordinator names, up to the number of pods it asks for, in the exact order a session would
(its best node first, bin-packing filling a node before the next), holds them, and answers with
one stream per shape. The coordinator merges the shards' streams into the global order and
tells each shard, in the next round or when it settles, how many pods of each stream it took.

Everything per pod or per node is a numpy array; the shape table, positions and diagnoses are
msgpack bytes (``shards.wire``). Shapes are named by their index in the cycle's shape table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from placement.diagnosis import Diagnosis
from placement.shapes import TaskShape
from shards.wire import unpack_diagnoses, unpack_positions, unpack_shapes, unpack_shares

Shares = tuple[tuple[str, int], ...]
Ints = npt.NDArray[np.int64]
NO_INTS: Ints = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Taken:
    """Per shape of the table, how many pods of its held stream the session took, and which of
    those it pipelined after all."""

    shapes: bytes  # the cycle's shape table (``shards.wire.pack_shapes``)
    keep: Ints  # per table entry
    pipelined: bytes = b""  # table index -> stream positions (``shards.wire.pack_positions``)
    # Table indexes of shapes to diagnose (why nothing more of them fits), once the rest is released.
    diagnose: Ints = field(default_factory=lambda: NO_INTS)

    def table(self) -> tuple[TaskShape, ...]:
        return unpack_shapes(self.shapes)

    def keep_by_shape(self) -> dict[TaskShape, int]:
        table = self.table()
        return {table[i]: int(n) for i, n in enumerate(self.keep.tolist()) if n > 0}

    def pipelined_by_shape(self) -> dict[TaskShape, tuple[int, ...]]:
        table = self.table()
        return {table[i]: p for i, p in unpack_positions(self.pipelined).items()} if self.pipelined else {}


@dataclass(frozen=True, slots=True)
class RoundRequest:
    """Release what was not taken, then place ``wanted[k]`` more pods of table shape ``place[k]``,
    each shape on top of the ones before."""

    proposal: str  # e<epoch>c<cycle>: one per cycle; another one releases what an older one held
    now: float
    taken: Taken
    place: Ints = field(default_factory=lambda: NO_INTS)
    wanted: Ints = field(default_factory=lambda: NO_INTS)


@dataclass(frozen=True, slots=True)
class ShapeStream:
    """One shape's placements on one shard, best first. Entry i puts ``counts[i]`` pods on node
    ``names[i]`` one after the other; its first pod scores (``band[i]``, ``placement[i]``) and
    the ones after it no less, so entries merge across shards by that score, then node name."""

    names: npt.NDArray[np.str_]
    counts: Ints
    band: npt.NDArray[np.float64]
    placement: npt.NDArray[np.float64]
    pipelined: npt.NDArray[np.bool_]
    gpu_mem: Ints  # per-device GPU memory of the node (fractions' queue share)
    shares: bytes = b""  # per entry, for fractions: groups and new groups (``shards.wire.pack_shares``)
    complete: bool = False  # the shard has no further node for this shape

    def __len__(self) -> int:
        return len(self.names)

    def share_list(self) -> list[tuple[Shares, tuple[str, ...]]]:
        return unpack_shares(self.shares)


@dataclass(frozen=True, slots=True)
class RoundReply:
    streams: tuple[ShapeStream, ...]  # per shape placed, in the request's order
    conflicts: Ints  # (k, 2) positions in ``place``: (i, j), i placed before j, may interact
    diagnoses: bytes = b""  # table index -> Diagnosis

    def diagnosed(self, table: tuple[TaskShape, ...]) -> dict[TaskShape, Diagnosis]:
        return {table[i]: d for i, d in unpack_diagnoses(self.diagnoses).items()} if self.diagnoses else {}


@dataclass(frozen=True, slots=True)
class Binds:
    """The pods to bind, column-wise: pod key, its job's reservation id, its shape and its
    position in that shape's held stream."""

    pods: npt.NDArray[np.str_]
    rids: tuple[str, ...]  # distinct reservation ids
    rid: Ints  # per pod: index into ``rids``
    shape: Ints  # per pod: table index
    position: Ints  # per pod

    def __len__(self) -> int:
        return len(self.pods)

    @staticmethod
    def empty() -> Binds:
        return Binds(np.zeros(0, dtype=np.str_), (), NO_INTS, NO_INTS, NO_INTS)


@dataclass(frozen=True, slots=True)
class SettleRequest:
    """The end of a proposal: release what was not taken, then commit the binds; everything
    else the proposal held (pipelined pods, pods evicted again later in the session) returns."""

    proposal: str
    now: float
    taken: Taken
    binds: Binds


@dataclass(frozen=True, slots=True)
class SettleReply:
    committed: dict[str, bool]  # rid -> every bind of it on this shard is committed
    diagnoses: bytes = b""

    def diagnosed(self, table: tuple[TaskShape, ...]) -> dict[TaskShape, Diagnosis]:
        return {table[i]: d for i, d in unpack_diagnoses(self.diagnoses).items()} if self.diagnoses else {}
