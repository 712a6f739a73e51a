"""The simple per-pod scheduler every benchmark compares against.

``FullScanPlacer`` makes exactly the decisions ``Placer`` makes (same filters, same KAI score
bands, same tie-break by name) but without any index: for every pod it filters and scores
every node of the table, numpy-vectorized, sorts them and takes the first. That is what a
scheduler without per-shape indexes pays per pod, so a benchmark that runs both on the same
input, in the same process, and checks that they choose the same nodes measures only what
the indexes save.

``FullScanCoordinator`` is the same coordinator with ``FullScanPlacer`` in its sessions and no
candidate pre-selection by the shards: every node of the cluster goes into the session and is
filtered and scored for every pod. It is what kube-scheduler does without node sampling, with
exactly kai-ray's semantics (gangs, queues, fair share), so its decisions must be kai-ray's.
"""

from __future__ import annotations

import numpy as np

from coordinator.coordinator import Coordinator, CycleResult
from coordinator.session import SessionState
from coordinator.shard_set import ShardSet
from coordinator.statement import Statement
from kai_ray.config import SchedulerConfig
from placement.node_table import NodeTable
from placement.placer import Choice, Mask, Placer
from placement.rows import merge_rows, table_from_rows
from placement.shapes import ResourceSchema, TaskShape


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


class FullScanCoordinator(Coordinator):
    def __init__(self, config: SchedulerConfig, shards: ShardSet) -> None:
        super().__init__(config, shards, placer_type=FullScanPlacer)

    def _session_table(self) -> NodeTable:
        return self._whole_table()

    def _whole_table(self) -> NodeTable:
        """Every node's row from the shards, every cycle (no mirror kept across cycles)."""
        parts = self.shards.every_row()
        return table_from_rows(merge_rows(parts, ResourceSchema.covering([p.schema.scalars_vector() for p in parts])))

    def _statement(self, state: SessionState, now: float, started: float) -> Statement:
        """Allocate places on the session's table, pod by pod (then prepare and commit)."""
        return Statement(state.table, state.queues, state.jobs_by_task)

    def _unchanged(self, now: float, names: tuple[str, ...]) -> CycleResult | None:
        """No shortcut for cycles with nothing new: every cycle is a whole session."""
        return None
