"""Past usage for time-based fair share: kai-ray's own accounting, and KAI's normalization.

KAI's rule (docs/time-based-fairshare): a queue's usage of a resource is what it was allocated
over the usage window, each moment weighted by ``0.5 ** (age / halfLifePeriod)`` when a half-life
is set, divided by the cluster's capacity over the same window with the same weights. 24
GPU-hours used on 10 GPUs over a 10-hour window is 0.24. The divider then lowers the over-quota
weight of queues that used more (``division.py``); deserved quota and priority are untouched.

``UsageLedger`` integrates allocations over time into buckets of ``resolution`` seconds (the
allocation seen at one observation holds until the next), per queue and for the cluster's
capacity. It keeps only the buckets the window can reach, and round-trips through plain
dicts so the adapter can keep it on the Queues' status across restarts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from coordinator.fairshare.tree import QueueTree
from kai_ray.config import UsageParams
from kai_ray.model import Node
from kai_ray.model.fairshare import Array

Usage = Mapping[str, tuple[float, float, float]]
RECORD_VERSION = 1
BUCKETS_PER_WINDOW = 512  # the default resolution is the window / this, at least a minute


def usage_array(tree: QueueTree, usage: Usage) -> Array:
    """Usage rows in the tree's queue order (queues without usage: 0)."""
    out = np.zeros((len(tree), 3))
    for name, values in usage.items():
        i = tree.index.get(name)
        if i is not None:
            out[i] = values
    return out


def capacity_of(nodes: Iterable[Node]) -> tuple[float, float, float]:
    """The cluster's capacity as KAI's usage queries count it (all nodes' gpu, cpu, memory)."""
    total = np.zeros(3)
    for node in nodes:
        total += (node.allocatable.gpu, node.allocatable.cpu, node.allocatable.memory)
    return (float(total[0]), float(total[1]), float(total[2]))


@dataclass(frozen=True, slots=True)
class UsageWindow:
    size: float
    kind: str = "sliding"  # sliding | tumbling
    tumbling_start: float | None = None
    half_life: float = 0.0

    @staticmethod
    def of(params: UsageParams) -> UsageWindow:
        return UsageWindow(params.windowSize, params.windowType, params.tumblingWindowStartTime, params.halfLifePeriod)

    def start(self, now: float) -> float:
        """Where the window begins: ``size`` ago, or the last tumbling reset (now, before the first)."""
        if self.kind != "tumbling":
            return now - self.size
        anchor = self.tumbling_start if self.tumbling_start is not None else now
        if anchor > now:
            return now
        return anchor + math.floor((now - anchor) / self.size) * self.size

    def weight(self, age: Array) -> Array:
        if self.half_life <= 0:
            return np.ones_like(age)
        return np.power(0.5, np.asarray(age) / self.half_life)


def default_resolution(params: UsageParams) -> float:
    raw = params.extra("resolution", "")
    if raw:
        from kai_ray.quantity import parse_duration

        return max(parse_duration(raw), 1e-3)
    return max(60.0, params.windowSize / BUCKETS_PER_WINDOW)


@dataclass(slots=True)
class UsageLedger:
    """Resource-seconds per queue and capacity-seconds of the cluster, in time buckets: one
    (queues, buckets, 3) array, so a cycle's credit and a refresh are single array operations."""

    window: UsageWindow
    resolution: float
    first: int = 0  # absolute number (time // resolution) of bucket row 0
    names: dict[str, int] = field(default_factory=dict)  # queue -> its row in ``used``
    used: Array = field(default_factory=lambda: np.zeros((0, 0, 3)))
    capacity: Array = field(default_factory=lambda: np.zeros((0, 3)))
    last_time: float | None = None
    last_rates: Array = field(default_factory=lambda: np.zeros((0, 3)))  # per queue row, from last_time on
    last_capacity: Array = field(default_factory=lambda: np.zeros(3))

    @property
    def keep(self) -> int:
        """Rows worth keeping: the whole window plus the bucket in progress."""
        return math.ceil(self.window.size / self.resolution) + 2

    # ------------------------------------------------------------------ recording
    def observe(self, now: float, allocated: Mapping[str, Iterable[float]], capacity: Iterable[float]) -> None:
        """What is allocated from ``now`` on; the previous observation is credited up to ``now``."""
        if self.last_time is not None and now > self.last_time:
            self._credit(self.last_time, now, self.last_rates, self.last_capacity)
        if self.last_time is None or now >= self.last_time:
            self.last_time = now
        values = {q: tuple(v) for q, v in allocated.items()}
        self._add_queues([q for q, v in values.items() if any(v) and q not in self.names])
        rates = np.zeros((len(self.names), 3))
        for queue, value in values.items():
            row = self.names.get(queue)
            if row is not None:
                rates[row] = value
        self.last_rates = rates
        self.last_capacity = np.asarray(tuple(capacity), dtype=np.float64)

    def _add_queues(self, names: list[str]) -> None:
        if not names:
            return
        for name in names:
            self.names[name] = len(self.names)
        grown = np.zeros((len(self.names), len(self.capacity), 3))
        grown[: len(self.used)] = self.used
        self.used = grown

    def _credit(self, t0: float, t1: float, rates: Array, capacity: Array) -> None:
        b0, b1 = math.floor(t0 / self.resolution), math.floor(t1 / self.resolution)
        if self._make_room(b0, b1):
            self._forget_idle()
            rates = self.last_rates
        edges = np.clip((np.arange(b0, b1 + 2) * self.resolution), t0, t1)
        seconds = np.diff(edges)  # time spent in each bucket b0..b1
        rows = np.arange(b0, b1 + 1) - self.first
        keep = rows >= 0
        rows, seconds = rows[keep], seconds[keep]
        self.capacity[rows] += seconds[:, None] * capacity
        busy = np.flatnonzero(rates.any(axis=1))
        if len(busy) and len(rows):
            self.used[busy[:, None], rows[None, :]] += seconds[None, :, None] * rates[busy][:, None, :]

    def _make_room(self, lo: int, hi: int) -> bool:
        """Rows for buckets ``lo`` to ``hi``, dropping rows the window no longer reaches; whether
        the rows moved."""
        if len(self.capacity) == 0:
            self.first = lo
        low = min(self.first, lo)
        high = max(self.first + len(self.capacity) - 1, hi)
        new_first = max(low, high - self.keep + 1)
        rows = high - new_first + 1
        if new_first == self.first and rows == len(self.capacity):
            return False
        shift = new_first - self.first
        self.capacity = _moved(self.capacity, shift, rows)
        self.used = _moved(self.used.transpose(1, 0, 2), shift, rows).transpose(1, 0, 2)
        self.first = new_first
        return True

    def _forget_idle(self) -> None:
        """Drop queues that have nothing left in the window and allocate nothing now."""
        rates = np.zeros((len(self.names), 3))
        rates[: len(self.last_rates)] = self.last_rates
        alive = self.used.any(axis=(1, 2)) | rates.any(axis=1)
        if not alive.all():
            kept = np.flatnonzero(alive)
            order = sorted(self.names, key=self.names.__getitem__)
            self.names = {order[i]: n for n, i in enumerate(kept)}
            self.used, rates = self.used[kept], rates[kept]
        self.last_rates = rates

    # ------------------------------------------------------------------ reading
    def usage(self, now: float) -> dict[str, tuple[float, float, float]]:
        """Every queue's usage normalized to the cluster's capacity over the window (KAI's ratio)."""
        if len(self.capacity) == 0 or not self.names:
            return {}
        weights = self._weights(now)
        capacity = weights @ self.capacity
        used = np.einsum("r,qrc->qc", weights, self.used)
        ratio = np.divide(used, capacity[None, :], out=np.zeros_like(used), where=capacity[None, :] > 0)
        rows = ratio.tolist()
        return {name: (rows[i][0], rows[i][1], rows[i][2]) for name, i in self.names.items() if any(rows[i])}

    def _weights(self, now: float) -> Array:
        """Per row: the share of the bucket inside the window times the decay at its middle."""
        starts = (self.first + np.arange(len(self.capacity))) * self.resolution
        ends = starts + self.resolution
        begin = self.window.start(now)
        lo, hi = np.maximum(starts, begin), np.minimum(ends, now)
        inside = np.clip(hi - lo, 0.0, None) / self.resolution
        middle = (lo + hi) / 2
        return np.asarray(inside * self.window.weight(np.maximum(now - middle, 0.0)), dtype=np.float64)

    def bucket(self, now: float) -> int:
        return math.floor(now / self.resolution)

    # ------------------------------------------------------------------ keeping
    def records(self) -> dict[str, dict[str, object]]:
        """One plain record per queue that used anything (capacity repeated in each)."""
        out: dict[str, dict[str, object]] = {}
        observed = np.flatnonzero(self.capacity.any(axis=1))
        for name, i in self.names.items():
            table = self.used[i]
            rows = np.flatnonzero(table.any(axis=1))
            if not len(rows):
                continue
            lo = int(min(rows[0], observed[0])) if len(observed) else int(rows[0])
            out[name] = {
                "version": RECORD_VERSION,
                "resolution": self.resolution,
                "firstBucket": self.first + lo,
                "allocated": _rounded(table[lo:]),
                "capacity": _rounded(self.capacity[lo:]),
            }
        return out

    def restore(self, records: Mapping[str, Mapping[str, object]]) -> list[str]:
        """Take kept records back (before any observation); returns the queues it could not read.
        Capacity is repeated in every queue's record: each kept bucket counts once."""
        bad: list[str] = []
        capacity: dict[tuple[float, int], Array] = {}
        parsed_records = []
        for queue, record in records.items():
            parsed = _parse_record(record)
            if parsed is None:
                bad.append(queue)
                continue
            parsed_records.append((queue, parsed))
        self._add_queues([q for q, _ in parsed_records if q not in self.names])
        for queue, (resolution, first, used, cap) in parsed_records:
            for row in range(len(used)):
                key = (resolution, first + row)
                capacity[key] = np.maximum(capacity.get(key, np.zeros(3)), cap[row])
                self._spread(self.names[queue], key, used[row])
        for key, cap in capacity.items():
            self._spread(None, key, cap)
        return bad

    def _spread(self, queue: int | None, kept: tuple[float, int], amount: Array) -> None:
        """Add one kept bucket (its resolution, its number) over this ledger's buckets."""
        resolution, number = kept
        t0, t1 = number * resolution, (number + 1) * resolution
        b0, b1 = math.floor(t0 / self.resolution), math.floor((t1 - 1e-9) / self.resolution)
        self._make_room(b0, b1)
        edges = np.clip(np.arange(b0, b1 + 2) * self.resolution, t0, t1)
        share = np.diff(edges) / (t1 - t0)
        rows = np.arange(b0, b1 + 1) - self.first
        keep = rows >= 0
        rows, share = rows[keep], share[keep]
        if not len(rows):
            return
        table = self.capacity if queue is None else self.used[queue]
        table[rows] += share[:, None] * amount


def _parse_record(record: Mapping[str, object]) -> tuple[float, int, Array, Array] | None:
    try:
        if int(str(record.get("version", RECORD_VERSION))) != RECORD_VERSION:
            return None
        resolution = float(str(record["resolution"]))
        first = int(str(record["firstBucket"]))
        used = np.asarray(record["allocated"], dtype=np.float64).reshape(-1, 3)
        capacity = np.asarray(record["capacity"], dtype=np.float64).reshape(-1, 3)
    except (KeyError, TypeError, ValueError):
        return None
    if resolution <= 0 or len(used) != len(capacity) or not (np.isfinite(used).all() and np.isfinite(capacity).all()):
        return None
    return resolution, first, used, capacity


def _moved(table: Array, shift: int, rows: int) -> Array:
    """``table``'s rows moved ``shift`` rows up, in ``rows`` rows (the other axes kept)."""
    out = np.zeros((rows, *table.shape[1:]))
    src = table[max(shift, 0) :]
    dst = max(-shift, 0)
    n = min(len(src), rows - dst)
    if n > 0:
        out[dst : dst + n] = src[:n]
    return out


def _rounded(table: Array) -> list[list[float]]:
    return [[float(f"{v:.6g}") for v in row] for row in table.tolist()]
