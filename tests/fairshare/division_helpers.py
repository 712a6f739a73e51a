"""Queues for fair-share tests, written one resource at a time (the divider treats each alike)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coordinator.fairshare import QueueSpec, QueueTree, divide


@dataclass(frozen=True)
class Q:
    """One queue's GPU settings; ``request`` of a parent is the sum of its children's unless given."""

    name: str
    quota: float = 0
    weight: float = 1
    limit: float = -1
    request: float | None = None
    parent: str | None = None
    priority: int = 100
    created: float = 0
    usage: float = 0


def rolled_up_requests(queues: list[Q]) -> dict[str, float]:
    children: dict[str | None, list[Q]] = {}
    for q in queues:
        children.setdefault(q.parent, []).append(q)

    def request(q: Q) -> float:
        if q.request is not None:
            return q.request
        return sum(request(c) for c in children.get(q.name, []))

    return {q.name: request(q) for q in queues}


def gpu_shares(queues: list[Q], total: float, k_value: float = 0.0) -> tuple[dict[str, float], float]:
    """Every queue's GPU fair share and what the top level left undistributed."""
    specs = [
        QueueSpec(
            q.name,
            q.parent,
            q.priority,
            q.created,
            deserved=(q.quota, 0, 0),
            over_quota_weight=(q.weight, 1, 1),
            limit=(q.limit, -1, -1),
        )
        for q in queues
    ]
    tree = QueueTree.build(specs)
    requests = rolled_up_requests(queues)
    by_name = {q.name: q for q in queues}
    request = np.array([[requests[n], 0, 0] for n in tree.names], dtype=float).reshape(len(tree), 3)
    usage = np.array([[by_name[n].usage, 0, 0] for n in tree.names], dtype=float).reshape(len(tree), 3)
    division = divide(tree, np.array([total, 0, 0], dtype=float), request, usage, k_value)
    shares = {n: float(division.fair_share[tree.index[n], 0]) for n in tree.names}
    return shares, float(division.remaining[0])
