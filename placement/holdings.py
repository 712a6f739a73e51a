"""What a pod holds on a node: the record a node table books, and undoes exactly.

A hold is active (allocated, binding or running), releasing (the pod is terminating: the
capacity frees once it is gone) or pipelined (the pod waits for releasing capacity). A session
keeps every hold it makes so that a rollback gives back exactly what was taken.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]


class Kind(enum.IntEnum):
    ACTIVE = 0  # allocated, binding or running
    RELEASING = 1  # terminating
    PIPELINED = 2  # waits for releasing capacity


@dataclass(frozen=True, slots=True)
class Holding:
    """One pod's hold on one node. ``shares`` are (group, MiB) for a fractional pod."""

    pod: str
    node: int
    kind: Kind
    vector: Vector
    shares: tuple[tuple[str, int], ...] = ()
    created_groups: tuple[str, ...] = ()
