"""What the coordinator and a shard say to each other while shards place pods (DESIGN §3).

One cycle's placement is a *proposal*: in each round the shard places, for every pod shape the
coordinator names, up to the number of pods it asks for, in the exact order a session would
(its best node first, binpack filling a node before the next), holds them, and answers with
one stream per shape. The coordinator merges the shards' streams into the global order and
tells each shard, in the next round or when it settles, how many pods of each stream it took.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from shards.placement import Diagnosis
from shards.shapes import TaskShape

Shares = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class RoundRequest:
    """Release what was not taken, then place. ``keep`` and ``pipelined`` refer to the pods
    already held for each shape, in stream order (a shape not named keeps nothing)."""

    proposal: str  # e<epoch>c<cycle>: one per cycle; another one releases what an older one held
    now: float
    shapes: tuple[TaskShape, ...] = ()  # placed in this order, each on top of the ones before
    wanted: tuple[int, ...] = ()  # pods wanted per shape
    keep: dict[TaskShape, int] = field(default_factory=dict)  # pods taken so far, per shape
    pipelined: dict[TaskShape, tuple[int, ...]] = field(default_factory=dict)  # taken pods now pipelined
    diagnose: tuple[TaskShape, ...] = ()  # why nothing more of these fits, once the rest is released


@dataclass(frozen=True, slots=True)
class ShapeStream:
    """One shape's placements on one shard, best first. Entry i puts ``counts[i]`` pods on node
    ``names[i]`` one after the other; its first pod scores (``band[i]``, ``placement[i]``) and
    the ones after it no less, so entries merge across shards by that score, then node name."""

    names: npt.NDArray[np.str_]
    counts: npt.NDArray[np.int64]
    band: npt.NDArray[np.float64]
    placement: npt.NDArray[np.float64]
    pipelined: npt.NDArray[np.bool_]
    gpu_mem: npt.NDArray[np.int64]  # per-device GPU memory of the node (fractions' queue share)
    shares: tuple[tuple[Shares, tuple[str, ...]], ...] = ()  # per entry, for fractions: groups, new groups
    complete: bool = False  # the shard has no further node for this shape

    def __len__(self) -> int:
        return len(self.names)

    @property
    def pods(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True, slots=True)
class RoundReply:
    streams: tuple[ShapeStream, ...]  # per shape asked for, in the request's order
    conflicts: tuple[tuple[int, int], ...]  # (i, j), i placed before j: their streams may interact
    diagnoses: dict[TaskShape, Diagnosis] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str
    rid: str  # the job's reservation id: a job is bound only when every shard commits it
    shape: TaskShape
    position: int  # which pod of the shape's kept stream


@dataclass(frozen=True, slots=True)
class SettleRequest:
    """The end of a proposal: release what was not taken, then commit the binds; everything
    else the proposal held (pipelined pods, pods evicted again later in the session) returns."""

    proposal: str
    now: float
    keep: dict[TaskShape, int] = field(default_factory=dict)
    pipelined: dict[TaskShape, tuple[int, ...]] = field(default_factory=dict)
    diagnose: tuple[TaskShape, ...] = ()
    binds: tuple[Bind, ...] = ()


@dataclass(frozen=True, slots=True)
class SettleReply:
    committed: dict[str, bool]  # rid -> every bind of it on this shard is committed
    diagnoses: dict[TaskShape, Diagnosis] = field(default_factory=dict)
