"""Which queues form the tree: KAI drops orphans (and their subtrees); cycles never reach a root.

Shared by the snapshot loader and the Kubernetes adapter's cache, so that ``kai-ray schedule``
and ``kai-ray run`` leave out the same queues and give the same reason for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_ray.model import Queue


@dataclass(frozen=True, slots=True)
class QueueForest:
    usable: tuple[str, ...]  # queues whose parent chain reaches a root, in input order
    unusable: dict[str, str]  # queue -> why it is left out
    cycles: dict[str, str]  # queue -> "a -> b -> a", for queues on (or below) a parent cycle


def classify_queues(queues: Mapping[str, Queue], invalid: Mapping[str, str] | None = None) -> QueueForest:
    """Split ``queues`` into the tree and the rest. ``invalid``: queues that exist but could not be
    read (name -> problem); their children are left out because of them, with that reason."""
    invalid = invalid or {}
    usable: list[str] = []
    unusable: dict[str, str] = {name: f"the Queue object is invalid ({why})" for name, why in invalid.items()}
    cycles: dict[str, str] = {}
    for name, queue in queues.items():
        chain = [name]
        parent = queue.parent
        while parent is not None and parent in queues and parent not in chain:
            chain.append(parent)
            parent = queues[parent].parent
        if parent is None:
            usable.append(name)
        elif parent in chain:
            loop = " -> ".join([*chain[chain.index(parent) :], parent])
            cycles[name] = loop
            unusable[name] = f"its parent queues form a cycle ({loop})"
        elif parent in invalid:
            unusable[name] = f"its ancestor queue {parent!r} is invalid ({invalid[parent]})"
        elif parent == queue.parent:
            unusable[name] = f"its parent queue {parent!r} does not exist (orphaned queues are ignored, as in KAI)"
        else:
            unusable[name] = f"its ancestor queue {parent!r} does not exist (orphaned queues are ignored, as in KAI)"
    return QueueForest(tuple(usable), unusable, cycles)
