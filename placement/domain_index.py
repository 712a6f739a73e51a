"""Best-first nodes for one pod shape among a subset of rows (a topology domain, or one band of
its preferred-level ranking), kept exact as the table changes.

The same structure as ``ShapeIndex``, built over the subset only: one vectorized pass over the
subset's rows, then only rows that changed since the last look are scored again. A session keeps
one per (shape, subset) and reuses it for every gang that tries the same domain, so choosing a
node inside a rack costs a few heap steps instead of a walk over the whole cluster's ranking.
"""

from __future__ import annotations

import heapq
import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placement.placer import Choice, Fit, Placer
from placement.shape_index import ShapeIndex
from placement.shapes import TaskShape

RowNumbers = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


class DomainIndex(ShapeIndex):
    def __init__(self, placer: Placer, shape: TaskShape, rows: RowNumbers) -> None:
        self.rows = rows
        self.members = np.zeros(0, dtype=bool)
        super().__init__(placer, shape)

    def _build(self) -> None:
        table = self.placer.table
        self.members = np.zeros(len(table), dtype=bool)
        self.members[self.rows] = True
        self.cursor = len(table.track_changes())
        self.epoch = table.static_epoch
        fit = self.placer.fit(self.shape, rows=self.rows)
        keep = fit.future
        rows = self.rows[keep]
        sub = Fit(fit.now[keep], keep[keep], None if fit.share_mib is None else fit.share_mib[keep])
        band, placement = self.placer.rank_keys(self.shape, sub, rows, aligned=True)
        self.heap = self._entries(rows, band, placement)
        heapq.heapify(self.heap)

    def _sync(self) -> None:
        fresh = self._changed_rows()
        table = self.placer.table
        placer, version, name_rank, members = self.placer, table.version, table.name_rank, self.members
        for row in set(fresh):
            if not members[row]:
                continue
            now, future, mib = placer.fit_row(self.shape, row)
            if future:
                key = placer.rank_row(self.shape, row, now, mib)
                heapq.heappush(self.heap, (-key[0], -key[1], int(name_rank[row]), row, int(version[row])))


@dataclass(frozen=True, slots=True)
class Rows:
    """A subset of a table's rows as a mask and as row numbers, with a key to share indexes by."""

    mask: Mask
    picked: RowNumbers
    key: bytes

    @staticmethod
    def of(mask: Mask) -> Rows:
        picked = np.flatnonzero(mask)
        return Rows(mask, picked, picked.tobytes())


_SESSIONS: weakref.WeakKeyDictionary[Placer, dict[tuple[TaskShape, bytes], DomainIndex]] = weakref.WeakKeyDictionary()


def best_in(placer: Placer, shape: TaskShape, rows: Rows, pipeline_only: bool) -> Choice | None:
    """The best node for one pod of ``shape`` among ``rows``, exactly as ``placer.best_node`` with
    ``allowed=rows.mask`` would choose it. A placer that chooses its own way (the benchmarks' full
    scan) is asked directly."""
    if type(placer).best_node is not Placer.best_node:
        return placer.best_node(shape, pipeline_only=pipeline_only, allowed=rows.mask)
    if not len(rows.picked):
        return None
    indexes = _SESSIONS.setdefault(placer, {})
    key = (shape, rows.key)
    index = indexes.get(key)
    if index is None:
        index = indexes[key] = DomainIndex(placer, shape, rows.picked)
    row = index.best()
    return None if row is None else placer.choose_on(row, shape, pipeline_only)
