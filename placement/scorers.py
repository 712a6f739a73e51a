"""KAI's node-order plugins, one small scorer each, with its vectorized and per-row form side by side.

A node's rank for a pod is (band, placement, name): the band is the sum of the band scorers'
points, which never overlap (1000 > 100 > 10), so the sum orders nodes lexicographically by
scorer; the placement scorer (bin-pack or spread) only decides between nodes in the same band,
and the node name breaks ties. Each scorer answers for many rows at once (numpy, used to build
and refresh the per-shape indexes) and for one row (plain Python, used when one node changed);
both forms must agree, which ``tests/placement/test_scorers.py`` checks for every scorer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from placement.mig_nodes import mig_enabled
from placement.node_table import NodeTable
from placement.shapes import CPU, GPU, TaskShape

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Scoring:
    """What every scorer may look at for one shape: the table, the shape, and the policy."""

    table: NodeTable
    shape: TaskShape
    gpu: str  # binpack | spread, for pods that want GPUs
    cpu: str  # binpack | spread, for CPU-only pods
    off: frozenset[str] = frozenset()  # band scorers whose plugin is turned off

    @property
    def strategy(self) -> str:
        return self.cpu if self.shape.is_cpu_only else self.gpu


class BandScorer(Protocol):
    name: str
    points: float

    def applies(self, scoring: Scoring) -> bool:
        """Whether the scorer is registered for this shape and policy at all."""
        ...

    def rows(self, scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Mask:
        """Which of ``rows`` earn the points."""
        ...

    def row(self, scoring: Scoring, row: int, now: bool, mib: int | None) -> bool: ...


class GpuSharingOrder:
    """A fraction that fits on a GPU that is already shared (only with GPU bin-packing)."""

    name, points = "gpusharingorder", 1000.0

    def applies(self, scoring: Scoring) -> bool:
        return scoring.shape.share is not None and scoring.gpu == "binpack"

    def rows(self, scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Mask:
        if mib is None:
            return np.zeros(len(rows), dtype=bool)
        return scoring.table.room_future[rows] >= mib

    def row(self, scoring: Scoring, row: int, now: bool, mib: int | None) -> bool:
        return mib is not None and bool(scoring.table.room_future[row] >= mib)


class NodeAvailability:
    """The pod fits on idle capacity: it binds now rather than waiting for releasing pods."""

    name, points = "nodeavailability", 100.0

    def applies(self, scoring: Scoring) -> bool:
        return True

    def rows(self, scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Mask:
        return now

    def row(self, scoring: Scoring, row: int, now: bool, mib: int | None) -> bool:
        return now


class ResourceType:
    """A CPU-only pod on a CPU-only node (GPU nodes are kept for GPU pods). A MIG-enabled node
    is a GPU node even when it offers no ``nvidia.com/gpu``."""

    name, points = "resourcetype", 10.0

    def applies(self, scoring: Scoring) -> bool:
        return scoring.shape.is_cpu_only

    def rows(self, scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Mask:
        table = scoring.table
        return (table.gpu_count[rows] <= 0) & ~mig_enabled(table)[rows]

    def row(self, scoring: Scoring, row: int, now: bool, mib: int | None) -> bool:
        table = scoring.table
        return bool(table.gpu_count[row] <= 0) and not mig_enabled(table)[row]


class NodePlacement:
    """Between nodes of one band: bin-pack prefers the fewest free GPUs (GPU pods) or CPU
    (CPU-only pods), spread the largest free share."""

    name = "nodeplacement"

    def rows(self, scoring: Scoring, rows: Ints) -> Floats:
        table = scoring.table
        column = CPU if scoring.shape.is_cpu_only else GPU
        free = table.future[rows, column]
        if scoring.strategy == "spread":
            total = table.alloc[rows, column] if column != GPU else table.gpu_count[rows]
            shares: Floats = np.divide(free, total, out=np.zeros_like(free), where=total > 0)
            return shares
        fuller: Floats = -free
        return fuller

    def row(self, scoring: Scoring, row: int) -> float:
        table = scoring.table
        column = CPU if scoring.shape.is_cpu_only else GPU
        free = float(table.future[row, column])
        if scoring.strategy == "spread":
            total = float(table.alloc[row, column] if column != GPU else table.gpu_count[row])
            return free / total if total > 0 else 0.0
        return -free


BAND_SCORERS: tuple[BandScorer, ...] = (GpuSharingOrder(), NodeAvailability(), ResourceType())
PLACEMENT = NodePlacement()


def band_rows(scoring: Scoring, rows: Ints, now: Mask, mib: Ints | None) -> Floats:
    band = np.zeros(len(rows))
    for scorer in BAND_SCORERS:
        if scorer.name not in scoring.off and scorer.applies(scoring):
            band += np.where(scorer.rows(scoring, rows, now, mib), scorer.points, 0.0)
    return band


def band_row(scoring: Scoring, row: int, now: bool, mib: int | None) -> float:
    band = 0.0
    for scorer in BAND_SCORERS:
        if scorer.name not in scoring.off and scorer.applies(scoring) and scorer.row(scoring, row, now, mib):
            band += scorer.points
    return band
