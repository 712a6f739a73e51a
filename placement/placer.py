"""Choosing a node (and GPU devices) for one pod, the way KAI's allocate does.

A node is a candidate when the pod fits on its idle capacity plus what releasing pods
will free ("future"). Candidates are ranked by KAI's summed score bands, which never
overlap, so the ranking is lexicographic:

1. gpusharingorder (+1000): a fraction fits on a GPU that is already shared;
2. nodeavailability (+100): the pod fits on idle capacity, no waiting;
3. resourcetype (+10): a CPU-only pod on a CPU-only node;
4. nodeplacement (0..9 binpack, 0..1 spread): binpack prefers the node with the least
   free GPUs (GPU pods) or CPU (CPU-only pods); spread the largest free share.

Ties go to the node whose name sorts first. The pod is *pipelined* when it only fits
with releasing capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kai_ray.config import SchedulerConfig
from kai_ray.model import GpuShare, mig_instances
from placement.constraints import ConstraintMasks
from placement.diagnosis import NOT_ENOUGH, NOT_ENOUGH_MIG, Diagnosis
from placement.dra_devices import Allocation
from placement.mig_nodes import accepts, refusal_counts
from placement.node_table import NodeTable
from placement.scorers import BAND_SCORERS, PLACEMENT, Scoring, band_row, band_rows
from placement.shapes import CORE_COLUMNS, CPU, GPU, MEMORY, PODS, TaskShape

if TYPE_CHECKING:
    from placement.shape_index import ShapeIndex

TOLERANCE = 1e-6
Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    gpu: str = "binpack"  # binpack | spread, for pods that want GPUs
    cpu: str = "binpack"  # binpack | spread, for CPU-only pods
    gpu_device: str = "pack"  # pack | spread: which shared GPU a fraction joins
    scorers_off: frozenset[str] = frozenset()  # band scorers whose plugin the config turned off

    @staticmethod
    def of(config: SchedulerConfig) -> PlacementPolicy:
        strategy = config.placementStrategy
        plugins = config.resolved_plugins
        off = frozenset(scorer.name for scorer in BAND_SCORERS if not plugins.applies(scorer.name))
        return PlacementPolicy(strategy.gpu, strategy.cpu, strategy.gpu_device, off)


@dataclass(frozen=True, slots=True)
class Choice:
    node: int
    pipelined: bool
    shares: tuple[tuple[str, int], ...] = ()  # (GPU group, MiB) for fractions
    create: tuple[str, ...] = ()  # groups that start being shared with this pod
    devices: Allocation | None = None  # DRA: per claim spec of the shape, the devices it gets


@dataclass(frozen=True, slots=True)
class Fit:
    """Per-node verdicts for one shape over the whole table."""

    now: Mask
    future: Mask
    share_mib: Ints | None  # MiB the fraction takes per device on each node


def share_mib(share: GpuShare, device_mib: Ints) -> Ints:
    """MiB of one device a fraction takes on each node (KAI truncates to whole MiB)."""
    if share.memory_mib is not None:
        return np.full(len(device_mib), share.memory_mib, dtype=np.int64)
    assert share.fraction is not None
    truncated: Ints = np.trunc(share.fraction * device_mib).astype(np.int64)
    return truncated


class Placer:
    """Finds the best node for a pod on one ``NodeTable``."""

    def __init__(self, table: NodeTable, policy: PlacementPolicy) -> None:
        self.table = table
        self.policy = policy
        self.masks = ConstraintMasks(table)
        self._indexes: dict[TaskShape, ShapeIndex] = {}
        self._requests: dict[TaskShape, list[float]] = {}
        self._requests_schema = table.schema  # the layout those cached requests follow
        self._scoring: dict[TaskShape, Scoring] = {}

    # ------------------------------------------------------------------ fit
    def fit(self, shape: TaskShape, allowed: Mask | None = None, rows: Ints | None = None) -> Fit:
        """Where ``shape`` fits now and once releasing pods are gone. ``allowed`` narrows the
        nodes considered (victim simulations only use some nodes); with ``rows`` the verdicts
        cover just those rows, in that order (used to refresh rows that changed)."""
        table = self.table
        pick: Ints | slice = slice(None) if rows is None else rows
        admitted = self.masks.admitted(shape.constraints)[pick]
        kinds = accepts(table, shape)
        if kinds is not None:  # MIG nodes take only some kinds of GPU request
            admitted = admitted & kinds[pick]
        if allowed is not None:
            admitted = admitted & allowed[pick]
        if shape.claims:  # DRA: only nodes whose free devices can take every claim
            admitted = admitted & table.devices.mask(shape.claims, np.arange(len(table))[pick], admitted)
        idle, future_cap = table.idle[pick], table.future[pick]
        request = table.schema.vector(shape.request)
        request[PODS] = 0  # pod slots are checked on their own below, as KAI's predicate does
        if shape.share is None:
            # Binding now also needs a free pod slot now (the shard re-checks exactly that).
            slot_now = idle[:, PODS] >= 1 - TOLERANCE
            if shape.is_best_effort:
                return Fit(admitted & slot_now, admitted & (future_cap[:, PODS] >= 1 - TOLERANCE), None)
            now = admitted & np.all(request <= idle + TOLERANCE, axis=1) & slot_now
            future = admitted & np.all(request <= future_cap + TOLERANCE, axis=1)
            future &= future_cap[:, PODS] >= 1 - TOLERANCE
            return Fit(now, future, None)
        gpu_mem = table.gpu_mem[pick]
        mib = share_mib(shape.share, gpu_mem)
        valid = admitted & (mib <= gpu_mem) & (mib > 0) & (table.gpu_count[pick] > 0)
        devices = shape.share.devices
        joinable = self._joinable_groups(mib, devices, rows)
        idle_whole = np.floor(idle[:, GPU] + 1e-9)
        future_whole = idle_whole + np.floor(future_cap[:, GPU] - idle[:, GPU] + 1e-9)
        now = valid & np.all(request <= idle + TOLERANCE, axis=1) & (idle_whole + joinable >= devices)
        future = valid & np.all(request <= future_cap + TOLERANCE, axis=1) & (future_whole + joinable >= devices)
        # A fraction that opens a new shared GPU also needs a slot for KAI's reservation pod.
        opens_group = joinable < devices if self.policy.gpu_device == "pack" else future_whole >= 1
        slots = np.where(opens_group, 2.0, 1.0)
        now &= idle[:, PODS] >= slots - TOLERANCE
        future &= future_cap[:, PODS] >= slots - TOLERANCE
        return Fit(now, future, mib)

    def fit_row(self, shape: TaskShape, row: int) -> tuple[bool, bool, int | None]:
        """``fit`` for one row in plain Python (numpy's per-call cost dominates for one row):
        (fits now, fits once releasing pods are gone, MiB per device for a fraction)."""
        table = self.table
        if not self.masks.admitted(shape.constraints)[row]:
            return False, False, None
        kinds = accepts(table, shape)
        if kinds is not None and not kinds[row]:
            return False, False, None
        if shape.claims and not table.devices.fits(row, shape.claims):
            return False, False, None
        request = self._request_list(shape)
        idle, future_cap = table.idle[row].tolist(), table.future[row].tolist()
        if shape.share is None:
            slot_now = idle[PODS] >= 1 - TOLERANCE
            if shape.is_best_effort:
                return slot_now, future_cap[PODS] >= 1 - TOLERANCE, None
            now = slot_now and all(r <= i + TOLERANCE for r, i in zip(request, idle, strict=True))
            future = future_cap[PODS] >= 1 - TOLERANCE and all(
                r <= f + TOLERANCE for r, f in zip(request, future_cap, strict=True)
            )
            return now, future, None
        device = int(table.gpu_mem[row])
        share = shape.share
        mib = share.memory_mib if share.memory_mib is not None else int(share.fraction * device)  # type: ignore[operator]
        if not (0 < mib <= device and table.gpu_count[row] > 0):
            return False, False, mib
        joinable = int(self._joinable_groups(np.array([mib]), share.devices, np.array([row]))[0])
        idle_whole = math.floor(idle[GPU] + 1e-9)
        future_whole = idle_whole + math.floor(future_cap[GPU] - idle[GPU] + 1e-9)
        now = idle_whole + joinable >= share.devices and all(
            r <= i + TOLERANCE for r, i in zip(request, idle, strict=True)
        )
        future = future_whole + joinable >= share.devices and all(
            r <= f + TOLERANCE for r, f in zip(request, future_cap, strict=True)
        )
        opens_group = joinable < share.devices if self.policy.gpu_device == "pack" else future_whole >= 1
        slots = 2.0 if opens_group else 1.0
        now = now and idle[PODS] >= slots - TOLERANCE
        future = future and future_cap[PODS] >= slots - TOLERANCE
        return now, future, mib

    def rank_row(self, shape: TaskShape, row: int, now: bool, mib: int | None) -> tuple[float, float]:
        """``rank_keys`` for one row in plain Python (``placement.scorers``, the per-row forms)."""
        scoring = self.scoring(shape)
        return band_row(scoring, row, now, mib), PLACEMENT.row(scoring, row)

    def scoring(self, shape: TaskShape) -> Scoring:
        found = self._scoring.get(shape)
        if found is None:
            found = self._scoring[shape] = Scoring(
                self.table, shape, self.policy.gpu, self.policy.cpu, self.policy.scorers_off
            )
        return found

    def policy_of(self, shape: TaskShape) -> str:
        """binpack or spread, for this shape's kind of pod."""
        return self.policy.cpu if shape.is_cpu_only else self.policy.gpu

    def request_list(self, shape: TaskShape) -> list[float]:
        """What a pod of ``shape`` asks of a node, as plain floats in column order (pods 0)."""
        return self._request_list(shape)

    def _request_list(self, shape: TaskShape) -> list[float]:
        if self._requests_schema is not self.table.schema:  # the table gained columns: re-lay every request
            self._requests.clear()
            self._requests_schema = self.table.schema
        cached = self._requests.get(shape)
        if cached is None:
            vector = self.table.schema.vector(shape.request)
            vector[PODS] = 0.0
            cached = self._requests[shape] = vector.tolist()
        return cached

    def _joinable_groups(self, mib: Ints, devices: int, rows: Ints | None) -> Ints:
        """How many already-shared GPUs per node can take one more portion of ``mib``."""
        table = self.table
        index = np.arange(len(table)) if rows is None else rows
        room = table.room_future[index]
        if devices == 1:
            return (room >= mib).astype(np.int64)
        counts = np.zeros(len(index), dtype=np.int64)
        for i in np.flatnonzero(room >= mib):
            row = int(index[i])
            device = int(table.gpu_mem[row])
            counts[i] = sum(
                1
                for usage in table.groups[row].values()
                if (free := usage.room_future(device)) is not None and free >= mib[i]
            )
        return counts

    # ---------------------------------------------------------------- score
    def rank_keys(self, shape: TaskShape, fit: Fit, rows: Ints, aligned: bool = False) -> tuple[Floats, Floats]:
        """(band, placement) for candidate ``rows``; higher is better in both. ``aligned``: the
        fit's arrays already cover exactly ``rows``."""
        now = fit.now if aligned else fit.now[rows]
        mib = None if fit.share_mib is None else (fit.share_mib if aligned else fit.share_mib[rows])
        scoring = self.scoring(shape)
        return band_rows(scoring, rows, now, mib), PLACEMENT.rows(scoring, rows)

    def best_node(self, shape: TaskShape, pipeline_only: bool = False, allowed: Mask | None = None) -> Choice | None:
        """The best node for one pod of ``shape``, as KAI ranks them; None when none fits."""
        index = self._index(shape)
        row = index.best() if allowed is None else index.best_among(allowed)
        if row is None:
            return None
        return self.choose_on(row, shape, pipeline_only)

    def index(self, shape: TaskShape) -> ShapeIndex:
        """The shape's best-first index over this table (built on first use, kept current)."""
        return self._index(shape)

    def _index(self, shape: TaskShape) -> ShapeIndex:
        index = self._indexes.get(shape)
        if index is None:
            from placement.shape_index import ShapeIndex

            index = self._indexes[shape] = ShapeIndex(self, shape)
        return index

    def choose_on(self, row: int, shape: TaskShape, pipeline_only: bool) -> Choice:
        """The concrete placement on ``row`` (GPU groups for fractions, devices for claims)."""
        choice = self._choose_on(row, shape, pipeline_only)
        if shape.claims:
            devices = self.table.devices.allocate(row, shape.claims)
            waits = devices is not None and self.table.devices.waits(devices)  # devices still releasing
            choice = replace(choice, devices=devices, pipelined=choice.pipelined or waits)
        return choice

    def _choose_on(self, row: int, shape: TaskShape, pipeline_only: bool) -> Choice:
        fits_now, _, mib = self.fit_row(shape, row)
        if shape.share is None:
            return Choice(row, pipeline_only or not fits_now)
        assert mib is not None
        return self._choose_devices(row, shape.share, mib, fits_now, pipeline_only)

    def _choose_devices(self, row: int, share: GpuShare, mib: int, fits_now: bool, pipeline_only: bool) -> Choice:
        table = self.table
        device = int(table.gpu_mem[row])
        pack = self.policy.gpu_device == "pack"
        options: list[tuple[float, str, str | None]] = []  # (score, tie, group or None for a whole GPU)
        for gid, usage in sorted(table.groups[row].items()):
            room = usage.room_future(device)
            if room is not None and room >= mib:
                used = usage.used / device
                options.append((used if pack else 1 - used, gid, gid))
        _, future_whole = table.whole_gpus_free(row)
        options.extend((0.0 if pack else 1.0, "~", None) for _ in range(max(future_whole, 0)))
        options.sort(key=lambda o: (-o[0], o[1]))
        shares: list[tuple[str, int]] = []
        created: list[str] = []
        pipelined = pipeline_only
        for _, _, existing in options[: share.devices]:
            if existing is None:
                gid = self._fresh_group(row, created)
                created.append(gid)
                pipelined = pipelined or not fits_now
            else:
                gid = existing
                room = table.groups[row][gid].room_idle(device)
                pipelined = pipelined or room is None or room < mib or not fits_now
            shares.append((gid, mib))
        return Choice(row, pipelined, tuple(shares), tuple(created))

    def _fresh_group(self, row: int, pending: list[str]) -> str:
        gid = self.table.new_group_id(row)
        k = 0
        while gid in pending:
            k += 1
            gid = f"{self.table.names[row]}-gpu-new{k}"
        return gid

    # ---------------------------------------------------------------- reasons
    def diagnose(self, shape: TaskShape, exclude: Mask | None = None) -> Diagnosis:
        """Why nodes cannot take the pod right now, counted by the first filter each fails."""
        table = self.table
        present = table.present & ~exclude if exclude is not None else table.present.copy()
        considered = int(present.sum())
        # KAI's resource-type predicate runs before the node filters it takes from kube-scheduler.
        counts = refusal_counts(table, shape, present)
        kinds = accepts(table, shape)
        if kinds is not None:
            present &= kinds
        admitted = self.masks.admitted(shape.constraints)
        for why, n in self.masks.reasons(shape.constraints, present).items():
            counts[why] = n
        remaining = present & admitted
        request = table.schema.vector(shape.request)
        # No node the pod may use at all: there is no "largest" one to compare its request with.
        largest = (
            {
                name: float(table.alloc[remaining, column].max(initial=0.0))
                for column, name in ((CPU, "cpu"), (MEMORY, "memory"), (GPU, "gpu"))
            }
            if remaining.any()
            else {}
        )
        checks = [(CPU, NOT_ENOUGH + "CPU cores"), (MEMORY, NOT_ENOUGH + "memory"), (GPU, NOT_ENOUGH + "GPUs")]
        for column, label in checks:
            if column == GPU and shape.share is not None:
                continue
            short = remaining & (table.future[:, column] + TOLERANCE < request[column])
            if short.any():
                counts[label] = int(short.sum())
                remaining &= ~short
        for name, count in mig_instances(shape.request.scalars).items():
            if name in table.schema.scalars:  # else no node here offers the profile at all
                column = len(CORE_COLUMNS) + table.schema.scalars.index(name)
                short = remaining & (table.future[:, column] + TOLERANCE < count)
            else:
                short = remaining.copy()
            if short.any():
                counts[NOT_ENOUGH_MIG + name] = int(short.sum())
                remaining &= ~short
        if shape.share is not None:
            short = remaining & ~self.fit(shape).future
            if short.any():
                counts[NOT_ENOUGH + "shared GPUs"] = int(short.sum())
                remaining &= ~short
        short = remaining & (table.future[:, PODS] < 1 - TOLERANCE)
        if short.any():
            counts["node(s) pod number exceeded"] = int(short.sum())
            remaining &= ~short
        if shape.claims:
            for why, n in table.devices.turned_away(shape.claims, remaining)[0].items():
                counts[why] = counts.get(why, 0) + n
        return Diagnosis(considered, counts, largest)

    def explain(self, shape: TaskShape) -> str:
        return self.diagnose(shape).describe(shape)
