"""KAI's node resource-type predicate: which kind of GPU request a node takes, by its MIG mode.

A node is MIG-enabled when its ``node-role.kubernetes.io/mig-enabled`` label says so (a label
that is there but is not a boolean says no), or, without the label, when it offers any
``nvidia.com/mig-*`` resource. The device plugin's ``nvidia.com/mig.strategy`` label then says
how its GPUs are offered: ``single`` (every GPU cut into one kind of instance and offered as
``nvidia.com/gpu``: only whole-GPU pods go there), ``mixed`` (instances offered by profile: only
pods asking for MIG profiles go there) or anything else (no rule beyond the resources). A pod
asking for a MIG profile never goes to a node that is not MIG-enabled. CPU-only pods go
anywhere. The refusals are KAI's fit-error messages, word for word.

Modes depend on node labels and allocatable only, so they are worked out again only when the
table's static epoch or schema moves.
"""

from __future__ import annotations

import enum
import functools
import weakref

import numpy as np
import numpy.typing as npt

from kai_ray import labels as L
from kai_ray.model import is_mig_resource, profile_gpus
from placement.node_table import NodeTable
from placement.shapes import CORE_COLUMNS, ResourceSchema, TaskShape

Mask = npt.NDArray[np.bool_]

NOT_MIG_NODE = "MIG job cannot be scheduled on non-MIG node"
SINGLE_STRATEGY_ONLY_WHOLE = "only whole gpu jobs can run on a node with MigStrategy='single'"
MIXED_STRATEGY_ONLY_MIG = "non MIG jobs cant run on a node with MigStrategy='mixed'"


class MigMode(enum.IntEnum):
    NONE = 0  # not MIG-enabled
    ENABLED = 1  # MIG-enabled, no (known) strategy
    SINGLE = 2
    MIXED = 3


class GpuKind(enum.Enum):
    CPU_ONLY = "cpu-only"
    WHOLE = "whole"  # whole GPUs (nvidia.com/gpu)
    SHARED = "shared"  # a GPU fraction or GPU memory
    MIG = "mig"  # MIG profiles (nvidia.com/mig-*), whatever else it asks


def gpu_kind(shape: TaskShape) -> GpuKind:
    """How KAI classes the pod's GPU request: a MIG profile wins over everything else."""
    if any(is_mig_resource(name) for name in shape.request.scalars):
        return GpuKind.MIG
    if shape.share is not None:
        return GpuKind.SHARED
    return GpuKind.WHOLE if shape.request.gpu > 0 else GpuKind.CPU_ONLY


def node_mode(labels: dict[str, str], offers_mig: bool) -> MigMode:
    """One node's mode from its labels and whether it offers MIG resources."""
    flag = labels.get(L.MIG_ENABLED_NODE_LABEL)
    enabled = _parse_bool(flag) if flag is not None else offers_mig
    if not enabled:
        return MigMode.NONE
    strategy = labels.get(L.MIG_STRATEGY_NODE_LABEL, "")
    return {"single": MigMode.SINGLE, "mixed": MigMode.MIXED}.get(strategy, MigMode.ENABLED)


def _parse_bool(text: str) -> bool:
    # Go's strconv.ParseBool: these spellings are booleans, anything else is an error (= not MIG).
    return text in ("1", "t", "T", "TRUE", "true", "True")


class _Modes:
    """One table's modes as of a static epoch and schema, with the rows each kind may use."""

    def __init__(self, stamp: tuple[int, ResourceSchema], modes: npt.NDArray[np.int8]) -> None:
        self.stamp = stamp
        self.modes = modes
        self.any_mig = bool(modes.any())
        self.accepted: dict[GpuKind, Mask | None] = {}


_MODES: weakref.WeakKeyDictionary[NodeTable, _Modes] = weakref.WeakKeyDictionary()


def _modes_of(table: NodeTable) -> _Modes:
    stamp = (table.static_epoch, table.schema)
    known = _MODES.get(table)
    if known is not None and known.stamp == stamp and len(known.modes) == len(table):
        return known
    columns = [len(CORE_COLUMNS) + j for j, name in enumerate(table.schema.scalars) if is_mig_resource(name)]
    offers: Mask = np.zeros(len(table), dtype=bool)
    if columns:
        offers = np.asarray((table.alloc[:, columns] > 0).any(axis=1), dtype=bool)
    modes = np.array(
        [node_mode(table.labels[row], bool(offers[row])) if table.present[row] else 0 for row in range(len(table))],
        dtype=np.int8,
    )
    modes.flags.writeable = False
    known = _MODES[table] = _Modes(stamp, modes)
    return known


def mig_modes(table: NodeTable) -> npt.NDArray[np.int8]:
    """Every row's ``MigMode`` (0 for an empty row). Shared until the table changes: read only."""
    return _modes_of(table).modes


def mig_enabled(table: NodeTable) -> Mask:
    enabled: Mask = mig_modes(table) != MigMode.NONE
    return enabled


def refusal(kind: GpuKind, mode: int) -> str | None:
    """KAI's message when a node of ``mode`` refuses a pod of ``kind``; None when it takes it."""
    if kind is GpuKind.CPU_ONLY:
        return None
    if mode == MigMode.NONE:
        return NOT_MIG_NODE if kind is GpuKind.MIG else None
    if mode == MigMode.SINGLE and kind is not GpuKind.WHOLE:
        return SINGLE_STRATEGY_ONLY_WHOLE
    if mode == MigMode.MIXED and kind is not GpuKind.MIG:
        return MIXED_STRATEGY_ONLY_MIG
    return None


def accepts(table: NodeTable, shape: TaskShape) -> Mask | None:
    """Rows whose MIG mode takes ``shape``; None when every row does (the common case: a
    cluster without MIG nodes and a pod that asks for no MIG profile). Placement asks this for
    every fit, so the answer per kind of request is kept until the table changes: read only."""
    kind = gpu_kind(shape)
    if kind is GpuKind.CPU_ONLY:
        return None
    known = _modes_of(table)
    if kind is not GpuKind.MIG and not known.any_mig:
        return None
    if kind not in known.accepted:
        refused = [mode for mode in MigMode if refusal(kind, mode) is not None]
        mask = ~np.isin(known.modes, refused)
        mask.flags.writeable = False
        known.accepted[kind] = mask
    return known.accepted[kind]


def refusal_counts(table: NodeTable, shape: TaskShape, rows: Mask) -> dict[str, int]:
    """How many of ``rows`` refuse ``shape``, by KAI's message."""
    kind = gpu_kind(shape)
    counts: dict[str, int] = {}
    if kind is GpuKind.CPU_ONLY:
        return counts
    modes = mig_modes(table)
    for mode in MigMode:
        why = refusal(kind, mode)
        n = int((rows & (modes == mode)).sum())
        if why is not None and n:
            counts[why] = counts.get(why, 0) + n
    return counts


def mig_gpus_free(table: NodeTable, rows: npt.NDArray[np.int64] | slice) -> npt.NDArray[np.float64]:
    """The GPUs the MIG instances free on ``rows`` (now, or once releasing pods are gone) count
    for in KAI's idle and releasing GPU sums: each free instance as its profile's GPUs."""
    columns, weights = _mig_columns(table.schema)
    future = table.future[rows]
    if not columns:
        return np.zeros(len(future))
    counted: npt.NDArray[np.float64] = np.maximum(future[:, columns], 0.0) @ weights
    return counted


@functools.lru_cache(maxsize=64)
def _mig_columns(schema: ResourceSchema) -> tuple[list[int], npt.NDArray[np.float64]]:
    columns = [len(CORE_COLUMNS) + j for j, name in enumerate(schema.scalars) if is_mig_resource(name)]
    weights = np.array([float(profile_gpus(schema.scalars[c - len(CORE_COLUMNS)]) or 0) for c in columns])
    return columns, weights
