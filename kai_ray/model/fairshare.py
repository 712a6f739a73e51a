"""What the fair-share divider takes: one ``QueueSpec`` per queue, arrays over ``RESOURCES``.

These live in the model layer because two readers build them (the snapshot session and the
``kai-ray fairshare`` input file) and the coordinator's divider consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

RESOURCES = ("gpu", "cpu", "memory")
UNLIMITED = -1.0
Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """What the divider needs to know about one queue."""

    name: str
    parent: str | None
    priority: int = 100
    created: float = 0.0
    deserved: tuple[float, float, float] = (0.0, 0.0, 0.0)
    over_quota_weight: tuple[float, float, float] = (1.0, 1.0, 1.0)
    limit: tuple[float, float, float] = (UNLIMITED, UNLIMITED, UNLIMITED)
