"""Which shard owns which node: rendezvous (highest-random-weight) hashing.

Each node goes to the shard with the highest hash of (node, shard). Adding a shard moves
only the nodes the new shard wins (about 1/N of them); removing one moves only its own
nodes; adding or removing nodes moves nothing else. The hash is stable across processes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def _weight(node: str, shard: int) -> int:
    digest = hashlib.blake2b(f"{node}\x00{shard}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(node: str, shards: Sequence[int]) -> int:
    return max(shards, key=lambda shard: (_weight(node, shard), -shard))


def assign(nodes: Iterable[str], shards: Sequence[int]) -> dict[str, int]:
    return {node: owner(node, shards) for node in nodes}


def moves(nodes: Iterable[str], before: Sequence[int], after: Sequence[int]) -> dict[str, tuple[int, int]]:
    """Nodes whose owner changes between two shard sets: node -> (old, new)."""
    out = {}
    for node in nodes:
        old, new = owner(node, before), owner(node, after)
        if old != new:
            out[node] = (old, new)
    return out
