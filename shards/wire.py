"""The small structured parts of the shard messages, as msgpack bytes.

Per-pod and per-node data crosses between the coordinator and the shards as numpy arrays (Ray
ships them as buffers, not element by element). What is left is small and structured: the
cycle's pod shapes, the shards' diagnoses, the shared GPUs a fraction lands on. These travel
as msgpack bytes rather than pickled Python objects, so a message is a handful of buffers
whatever the number of pods, and a shape table decodes once per shard however often it comes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import msgpack

from kai_ray.model import GpuShare, ResourceVector, SelectorRequirement, Toleration
from placement.diagnosis import Diagnosis
from placement.shapes import Constraints, TaskShape

Plain = Any


def _shape_plain(shape: TaskShape) -> Plain:
    r, share, c = shape.request, shape.share, shape.constraints
    return [
        [r.cpu, r.memory, r.gpu, r.pods, dict(r.scalars)],
        None if share is None else [share.fraction, share.memory_mib, share.devices],
        [
            [list(pair) for pair in c.node_selector],
            [[[q.key, q.operator, list(q.values), q.field] for q in term] for term in c.affinity],
            [[t.key, t.operator, t.value, t.effect] for t in c.tolerations],
        ],
        shape.legacy_mig,
    ]


def _shape_of(plain: Plain) -> TaskShape:
    (cpu, memory, gpu, pods, scalars), share, (selector, affinity, tolerations), legacy_mig = plain
    return TaskShape(
        ResourceVector.of(cpu, memory, gpu, pods, scalars),
        None if share is None else GpuShare(share[0], share[1], share[2]),
        Constraints(
            tuple((k, v) for k, v in selector),
            tuple(tuple(SelectorRequirement(k, o, tuple(v), f) for k, o, v, f in term) for term in affinity),
            tuple(Toleration(k, o, v, e) for k, o, v, e in tolerations),
        ),
        legacy_mig=legacy_mig,
    )


def pack_shapes(shapes: Sequence[TaskShape]) -> bytes:
    return bytes(msgpack.packb([_shape_plain(s) for s in shapes]))


@lru_cache(maxsize=64)
def unpack_shapes(packed: bytes) -> tuple[TaskShape, ...]:
    """The shapes of a table; the same bytes give the very same objects (a shard keys its held
    streams and indexes by them, round after round)."""
    return tuple(_shape_of(p) for p in msgpack.unpackb(packed, strict_map_key=False))


def pack_diagnoses(diagnoses: Mapping[int, Diagnosis]) -> bytes:
    """Diagnoses keyed by a shape's place in the message's shape table."""
    return bytes(msgpack.packb([[i, d.nodes, d.counts, d.largest] for i, d in sorted(diagnoses.items())]))


def unpack_diagnoses(packed: bytes) -> dict[int, Diagnosis]:
    return {i: Diagnosis(n, dict(c), dict(lg)) for i, n, c, lg in msgpack.unpackb(packed, strict_map_key=False)}


def pack_positions(positions: Mapping[int, Sequence[int]]) -> bytes:
    """Stream positions per shape-table index (the pods turned pipelined)."""
    return bytes(msgpack.packb([[i, list(p)] for i, p in sorted(positions.items()) if p]))


def unpack_positions(packed: bytes) -> dict[int, tuple[int, ...]]:
    return {i: tuple(p) for i, p in msgpack.unpackb(packed, strict_map_key=False)}


def pack_shares(shares: Sequence[tuple[tuple[tuple[str, int], ...], tuple[str, ...]]]) -> bytes:
    """Per stream entry of a fraction: the shared GPUs it sits on (group, MiB) and those it opens."""
    return bytes(msgpack.packb([[[list(g) for g in s], list(c)] for s, c in shares]))


def unpack_shares(packed: bytes) -> list[tuple[tuple[tuple[str, int], ...], tuple[str, ...]]]:
    if not packed:
        return []
    return [(tuple((g, int(m)) for g, m in s), tuple(c)) for s, c in msgpack.unpackb(packed)]
