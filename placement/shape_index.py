"""Best-first candidates for one pod shape, kept exact as the table changes.

Built once per shape with one vectorized pass over every node (filter + score), then kept
current cheaply: every change to a row is logged by the table, and before answering the
index re-scores just the rows changed since it last looked and pushes fresh entries.
Entries carry the row's version; an entry whose row has moved on is stale and skipped.
So the first live entry is always the best feasible node in the session's exact ranking
(band, placement, name), at the cost of a heap pop instead of a scan of every node.
"""

from __future__ import annotations

import heapq

import numpy as np
import numpy.typing as npt

from placement.placer import Fit, Placer
from placement.shapes import TaskShape

Entry = tuple[float, float, int, int, int]  # -band, -placement, name rank, row, row version


class ShapeIndex:
    def __init__(self, placer: Placer, shape: TaskShape) -> None:
        self.placer = placer
        self.shape = shape
        self.heap: list[Entry] = []
        self._build()

    def _build(self) -> None:
        table = self.placer.table
        self.cursor = len(table.track_changes())
        self.epoch = table.static_epoch
        fit = self.placer.fit(self.shape)
        rows = np.flatnonzero(fit.future)
        band, placement = self.placer.rank_keys(self.shape, fit, rows)
        self.heap = self._entries(rows, band, placement)
        heapq.heapify(self.heap)

    def best(self) -> int | None:
        """The best feasible row now, or None."""
        self._sync()
        version = self.placer.table.version
        heap = self.heap
        while heap:
            entry = heap[0]
            if entry[4] == version[entry[3]]:
                return entry[3]
            heapq.heappop(heap)
        return None

    def best_among(self, allowed: npt.NDArray[np.bool_]) -> int | None:
        """The best feasible row that ``allowed`` admits (victim simulations look at some nodes
        only). The heap is walked in order without being changed, so this costs a few steps
        when the overall best is allowed, which is the common case."""
        best = self.best()  # also drops dead entries from the top
        if best is None or allowed[best]:
            return best
        version, heap = self.placer.table.version, self.heap
        frontier = [(heap[0], 0)]
        while frontier:
            entry, at = heapq.heappop(frontier)
            row = entry[3]
            if allowed[row] and entry[4] == version[row]:
                return row
            for child in (2 * at + 1, 2 * at + 2):
                if child < len(heap):
                    heapq.heappush(frontier, (heap[child], child))
        return None

    def _changed_rows(self) -> list[int]:
        """Rows changed since the last look (none after a rebuild, which re-scores every row)."""
        table = self.placer.table
        if table.static_epoch != self.epoch:  # labels, taints or the node set changed: start over
            self._build()
            return []
        log = table.track_changes()
        fresh = log[self.cursor :]
        self.cursor = len(log)
        return fresh

    def _sync(self) -> None:
        fresh = self._changed_rows()
        if not fresh:
            return
        table = self.placer.table
        if len(fresh) <= 8:  # the common case, one pod placed: plain Python beats numpy here
            placer, version, name_rank = self.placer, table.version, table.name_rank
            for row in set(fresh):
                now, future, mib = placer.fit_row(self.shape, row)
                if future:
                    key = placer.rank_row(self.shape, row, now, mib)
                    heapq.heappush(self.heap, (-key[0], -key[1], int(name_rank[row]), row, int(version[row])))
            return
        changed = np.unique(np.asarray(fresh, dtype=np.int64))
        fit = self.placer.fit(self.shape, rows=changed)
        keep = fit.future
        if not keep.any():
            return
        sub = Fit(fit.now[keep], keep[keep], None if fit.share_mib is None else fit.share_mib[keep])
        rows = changed[keep]
        band, placement = self.placer.rank_keys(self.shape, sub, rows, aligned=True)
        for entry in self._entries(rows, band, placement):
            heapq.heappush(self.heap, entry)

    def _entries(self, rows: np.ndarray, band: np.ndarray, placement: np.ndarray) -> list[Entry]:
        table = self.placer.table
        return list(
            zip(
                (-band).tolist(),
                (-placement).tolist(),
                table.name_rank[rows].tolist(),
                rows.tolist(),
                table.version[rows].tolist(),
                strict=True,
            )
        )
