"""The simple per-pod scheduler every placement benchmark compares against.

``FullScanPlacer`` makes exactly the decisions ``Placer`` makes (same filters, same KAI score
bands, same tie-break by name) but without any index: for every pod it filters and scores
every node of the table, numpy-vectorized, sorts them and takes the first. That is what a
scheduler without per-shape indexes pays per pod, so a benchmark that runs both on the same
input, in the same process, and checks that they choose the same nodes measures only what
the indexes save.
"""

from __future__ import annotations

import numpy as np

from shards.placement import Choice, Mask, Placer
from shards.shapes import TaskShape


class FullScanPlacer(Placer):
    def best_node(self, shape: TaskShape, pipeline_only: bool = False, allowed: Mask | None = None) -> Choice | None:
        """The best node for one pod of ``shape``, found by scanning every node."""
        fit = self.fit(shape, allowed)
        rows = np.flatnonzero(fit.future)
        if not len(rows):
            return None
        band, placement = self.rank_keys(shape, fit, rows)
        order = np.lexsort((self.table.name_rank[rows], -placement, -band))
        return self.choose_on(int(rows[order[0]]), shape, pipeline_only)
