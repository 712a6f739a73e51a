"""KAI's fair-share division (proportion plugin), vectorized over queues.

Per resource and level by level down the tree, each parent's fair share is divided
among its children (the top level divides the cluster total):

1. Deserved phase: every queue gets ``min(deserved, requestable)``; -1 deserves the
   whole amount. Nothing is scaled, so over-subscribed quotas can exceed the total.
2. Over-quota phase: priority buckets, highest first. In rounds, each unsatisfied
   queue with a non-zero weight gets its weighted part of what the round started
   with, in whole units (floor), or all it still requests if that is less. Another
   round runs while some queue asked for less than its part.
3. Leftover phase: per bucket, highest first, one unit at a time to the queues with
   the largest rounded-off remainder (ties: older queue, then name).

Every (level, resource, parent) is an independent segment, so a level is processed
for all parents and all three resources at once with segment sums.

One deliberate difference from KAI: in the leftover phase a queue never receives more
than it still requests. KAI gives a whole unit even when the queue asked for only part
of one more (possible with fractional GPU requests), which lifts its fair share above
its request; kai-ray passes that unit on to the next queue instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coordinator.fairshare.tree import QueueTree
from kai_ray.model.fairshare import UNLIMITED, Array

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Division:
    fair_share: Array  # (Q, 3)
    remaining: Array  # (3,) what the top level left undistributed


def divide(tree: QueueTree, total: Array, request: Array, usage: Array | None = None, k_value: float = 0.0) -> Division:
    """Fair shares for every queue; ``request`` and ``usage`` are (Q, 3) per queue."""
    n = len(tree)
    fair = np.zeros((n, 3), dtype=np.float64)
    remaining_top = np.zeros(3, dtype=np.float64)
    if n == 0:
        return Division(fair, np.asarray(total, dtype=np.float64).copy())
    usage = np.zeros((n, 3)) if usage is None else usage
    for level in range(int(tree.depth.max()) + 1):
        queues = np.flatnonzero(tree.depth == level)
        level_remaining = _divide_level(
            tree, queues, np.asarray(total, dtype=np.float64), request, usage, k_value, fair
        )
        if level == 0:
            remaining_top = level_remaining
    return Division(fair, remaining_top)


def _divide_level(
    tree: QueueTree,
    queues: Ints,
    total: Array,
    request: Array,
    usage: Array,
    k_value: float,
    fair: Array,
) -> Array:
    m = len(queues)
    # Items are (resource, queue) pairs laid out resource-major: item = r * m + j.
    q = np.tile(queues, 3)
    r = np.repeat(np.arange(3), m)
    parent = tree.parent[q]
    seg_key = (parent + 1) * 3 + r
    seg_keys, seg = np.unique(seg_key, return_inverse=True)
    seg_parent = seg_keys // 3 - 1
    seg_res = seg_keys % 3
    seg_total = np.where(seg_parent < 0, total[seg_res], fair[np.maximum(seg_parent, 0), seg_res])
    n_seg = len(seg_keys)

    deserved = tree.deserved[q, r]
    limit = tree.limit[q, r]
    weight = tree.weight[q, r]
    req = request[q, r]
    requestable = np.where(limit == UNLIMITED, req, np.minimum(limit, req))
    share = np.minimum(np.where(deserved == UNLIMITED, seg_total[seg], deserved), requestable)

    remaining = seg_total - np.bincount(seg, share, minlength=n_seg)
    remaining = np.where(remaining > 0, remaining, 0.0)
    rank = _bucket_rank(seg, tree.priority[q])
    leftover = np.zeros(len(q))
    has_leftover = np.zeros(len(q), dtype=bool)
    for bucket in range(int(rank.max()) + 1 if len(rank) else 0):
        in_bucket = (rank == bucket) & (remaining[seg] > 0)
        _over_quota_rounds(
            in_bucket,
            seg,
            n_seg,
            req,
            requestable,
            limit,
            weight,
            usage[q, r],
            k_value,
            share,
            remaining,
            leftover,
            has_leftover,
        )
    _hand_out_leftovers(tree, q, seg, rank, requestable, share, remaining, leftover, has_leftover)
    fair[q, r] = share
    top = np.zeros(3)
    roots = seg_parent < 0
    top[seg_res[roots]] = remaining[roots]
    return top


def _bucket_rank(seg: Ints, priority: Ints) -> Ints:
    """0 for the highest priority present in a segment, 1 for the next, and so on."""
    order = np.lexsort((-priority, seg))
    seg_sorted, prio_sorted = seg[order], priority[order]
    new_seg = np.ones(len(seg), dtype=bool)
    new_seg[1:] = seg_sorted[1:] != seg_sorted[:-1]
    step = np.zeros(len(seg), dtype=np.int64)
    step[1:] = (~new_seg[1:]) & (prio_sorted[1:] != prio_sorted[:-1])
    counted = np.cumsum(step)
    seg_start = np.maximum.accumulate(np.where(new_seg, np.arange(len(seg)), 0))
    rank = np.empty(len(seg), dtype=np.int64)
    rank[order] = counted - counted[seg_start]
    return rank


def _over_quota_rounds(
    in_bucket: Bools,
    seg: Ints,
    n_seg: int,
    req: Array,
    requestable: Array,
    limit: Array,
    weight: Array,
    usage: Array,
    k_value: float,
    share: Array,
    remaining: Array,
    leftover: Array,
    has_leftover: Bools,
) -> None:
    alive = np.bincount(seg, in_bucket, minlength=n_seg) > 0
    while alive.any():
        considered = in_bucket & alive[seg]
        wanted = np.where(considered, np.maximum(requestable - share, 0.0), 0.0)
        total_weight = np.bincount(seg, np.where(wanted > 0, weight, 0.0), minlength=n_seg)
        unsatisfied = considered & (req > share) & ((limit == UNLIMITED) | (limit > share))
        norm = np.divide(weight, total_weight[seg], out=np.zeros_like(weight), where=total_weight[seg] > 0)
        share_weight = np.where(unsatisfied, np.maximum(0.0, norm + k_value * (norm - usage)), 0.0)
        weight_sum = np.bincount(seg, share_weight, minlength=n_seg)
        alive &= (total_weight > 0) & (weight_sum > 0)
        takers = unsatisfied & (weight != 0) & alive[seg]
        part = np.divide(remaining[seg] * share_weight, weight_sum[seg], out=np.zeros_like(share_weight), where=takers)
        satisfied_now = takers & (wanted <= part)
        rounded = np.floor(part)
        give = np.where(satisfied_now, wanted, np.where(takers & (rounded > 0), rounded, 0.0))
        has_leftover[satisfied_now] = False
        keep = takers & ~satisfied_now & (part - give > 0)
        leftover[keep] = (part - give)[keep]
        has_leftover[keep] = True
        share += give
        remaining -= np.bincount(seg, give, minlength=n_seg)
        another = np.bincount(seg, (give != 0) & (wanted < part), minlength=n_seg) > 0
        alive &= another & (remaining != 0)


def _hand_out_leftovers(
    tree: QueueTree,
    q: Ints,
    seg: Ints,
    rank: Ints,
    requestable: Array,
    share: Array,
    remaining: Array,
    leftover: Array,
    has_leftover: Bools,
) -> None:
    candidates = np.flatnonzero(has_leftover & (remaining[seg] > 0))
    ordered = sorted(
        candidates.tolist(),
        key=lambda i: (seg[i], rank[i], -leftover[i], tree.created[q[i]], tree.names[q[i]]),
    )
    for item in ordered:
        s = seg[item]
        if remaining[s] <= 0:
            continue
        give = min(1.0, remaining[s], max(0.0, requestable[item] - share[item]))
        share[item] += give
        remaining[s] -= give
