"""The queue tree as arrays: one row per queue, one column per divided resource.

Columns follow ``RESOURCES`` (gpu devices, cpu millicores, memory bytes). ``-1`` in
``deserved`` or ``limit`` means unlimited, as in KAI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kai_ray.model.fairshare import Array, QueueSpec


@dataclass(slots=True)
class QueueTree:
    """Queues in breadth-first order (parents before children) with their quota arrays."""

    names: list[str]
    parent: npt.NDArray[np.int64]  # -1 for top-level queues
    depth: npt.NDArray[np.int64]
    priority: npt.NDArray[np.int64]
    created: Array
    deserved: Array  # (Q, 3)
    weight: Array
    limit: Array
    children: list[list[int]] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def build(specs: Sequence[QueueSpec]) -> QueueTree:
        """Order the queues breadth-first; every parent named must be among ``specs``."""
        by_name = {s.name: s for s in specs}
        kids: dict[str | None, list[QueueSpec]] = {}
        for spec in specs:
            parent_name = spec.parent if spec.parent in by_name else None
            kids.setdefault(parent_name, []).append(spec)
        for siblings in kids.values():
            # Creation order, then name: the order KAI's tie-breaks use.
            siblings.sort(key=lambda s: (s.created, s.name))
        ordered: list[QueueSpec] = []
        depths: list[int] = []
        frontier: list[tuple[QueueSpec, int]] = [(s, 0) for s in kids.get(None, [])]
        while frontier:
            nxt: list[tuple[QueueSpec, int]] = []
            for spec, d in frontier:
                ordered.append(spec)
                depths.append(d)
                nxt.extend((c, d + 1) for c in kids.get(spec.name, []))
            frontier = nxt
        index = {s.name: i for i, s in enumerate(ordered)}
        parent = np.array([index.get(s.parent or "", -1) for s in ordered], dtype=np.int64)
        children: list[list[int]] = [[] for _ in ordered]
        for i, p in enumerate(parent):
            if p >= 0:
                children[int(p)].append(i)
        n = len(ordered)
        return QueueTree(
            names=[s.name for s in ordered],
            parent=parent,
            depth=np.array(depths, dtype=np.int64),
            priority=np.array([s.priority for s in ordered], dtype=np.int64),
            created=np.array([s.created for s in ordered], dtype=np.float64),
            deserved=np.array([s.deserved for s in ordered], dtype=np.float64).reshape(n, 3),
            weight=np.array([s.over_quota_weight for s in ordered], dtype=np.float64).reshape(n, 3),
            limit=np.array([s.limit for s in ordered], dtype=np.float64).reshape(n, 3),
            children=children,
            index=index,
        )

    def __len__(self) -> int:
        return len(self.names)

    def is_leaf(self, i: int) -> bool:
        return not self.children[i]

    def path_to_root(self, i: int) -> list[int]:
        """``i`` and its ancestors, leaf first."""
        path = []
        while i >= 0:
            path.append(i)
            i = int(self.parent[i])
        return path

    def roll_up(self, per_queue: Array) -> Array:
        """Add every queue's row into all of its ancestors (deepest level first)."""
        total = per_queue.copy()
        for i in np.argsort(-self.depth, kind="stable"):
            p = self.parent[i]
            if p >= 0:
                total[p] += total[i]
        return total
