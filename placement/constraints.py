"""Static node filters (selectors, affinity, taints, readiness) as cached boolean masks.

These depend only on node labels/taints/readiness, never on capacity, so one mask per
distinct ``Constraints`` serves every pod with the same constraints until a node's
labels, taints or readiness change (the table's ``static_epoch``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kai_ray.model import Taint, Toleration
from placement.node_table import NodeTable
from placement.shapes import Constraints

Mask = npt.NDArray[np.bool_]
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
# Why a node is turned away: kube-scheduler's filter messages, which KAI passes on (runbooks read
# them), counted per reason in a shape's diagnosis (``placement.diagnosis``).
NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
TAINTED = "node(s) had untolerated taint(s)"
MISMATCH = "node(s) didn't match Pod's node affinity/selector"
NOT_READY_TAINT = Taint("node.kubernetes.io/not-ready", "", "NoSchedule")


def tolerates_all(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    """PreferNoSchedule taints never block; NoSchedule and NoExecute must be tolerated."""
    return all(taint.effect == "PreferNoSchedule" or any(t.tolerates(taint) for t in tolerations) for taint in taints)


class ConstraintMasks:
    """Masks of nodes that a pod's constraints admit, recomputed when node labels change."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._epoch = -1
        self._cache: dict[Constraints, Mask] = {}

    def admitted(self, constraints: Constraints) -> Mask:
        table = self.table
        if self._epoch != table.static_epoch:
            self._cache.clear()
            self._epoch = table.static_epoch
        mask = self._cache.get(constraints)
        if mask is None:
            mask = self._compute(constraints)
            self._cache[constraints] = mask
        return mask

    def _compute(self, constraints: Constraints) -> Mask:
        table = self.table
        tolerations = constraints.tolerations
        out = table.present.copy()
        if not tolerates_all((NOT_READY_TAINT,), tolerations):
            out &= table.ready
        if not tolerates_all((UNSCHEDULABLE_TAINT,), tolerations):
            out &= ~table.unschedulable
        pinned = _pinned_nodes(constraints)
        if pinned is not None:  # e.g. a pod tied to its claim's node: look at those rows only
            keep = np.zeros(len(out), dtype=bool)
            keep[[table.index[n] for n in pinned if n in table.index]] = True
            out &= keep
        # Clusters have a handful of distinct taint sets: each is judged once, not once per node.
        verdicts: dict[tuple[Taint, ...], bool] = {}
        checks_labels = bool(constraints.node_selector or constraints.affinity)
        for row in np.flatnonzero(out):
            taints = table.taints[row]
            tolerated = verdicts.get(taints)
            if tolerated is None:
                tolerated = verdicts[taints] = tolerates_all(taints, tolerations)
            if not tolerated or (checks_labels and not constraints.matches_labels(table.labels[row], table.names[row])):
                out[row] = False
        return out

    def reasons(self, constraints: Constraints, rows: Mask | None = None) -> dict[str, int]:
        """How many of ``rows`` (default: present nodes) each static filter turns away."""
        table = self.table
        counts = dict.fromkeys((NOT_READY, UNSCHEDULABLE, TAINTED, MISMATCH), 0)
        considered = table.present if rows is None else rows
        for row in np.flatnonzero(considered & ~self.admitted(constraints)):
            if not table.ready[row] and not tolerates_all((NOT_READY_TAINT,), constraints.tolerations):
                counts[NOT_READY] += 1
            elif table.unschedulable[row] and not tolerates_all((UNSCHEDULABLE_TAINT,), constraints.tolerations):
                counts[UNSCHEDULABLE] += 1
            elif not tolerates_all(table.taints[row], constraints.tolerations):
                counts[TAINTED] += 1
            elif not constraints.matches_labels(table.labels[row], table.names[row]):
                counts[MISMATCH] += 1
        return {k: v for k, v in counts.items() if v}


def _pinned_nodes(constraints: Constraints) -> set[str] | None:
    """The only nodes the affinity can admit when every term names them (``metadata.name In``)."""
    if not constraints.affinity:
        return None
    names: set[str] = set()
    for term in constraints.affinity:
        pin = next((r for r in term if r.field and r.key == "metadata.name" and r.operator == "In"), None)
        if pin is None:
            return None
        names.update(pin.values)
    return names
