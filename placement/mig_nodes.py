"""KAI's node resource-type predicate: which kind of GPU request a node takes, by its MIG mode.

A node's mode (``kai_ray.model.MigMode``, from its labels and resources) is a column of the node
table, worked out when the node is added or changes. ``single`` (every GPU cut into one kind of
instance and offered as ``nvidia.com/gpu``) takes only whole-GPU pods, ``mixed`` (instances
offered by profile) only pods asking for MIG profiles, a MIG-enabled node without a known
strategy anything its resources allow. A pod asking for a MIG profile never goes to a node that
is not MIG-enabled. CPU-only pods go anywhere. A legacy MIG pod (one that asks for MIG by
annotation) goes nowhere: KAI's predicate refuses it before anything else. The refusals are KAI's
fit-error messages, word for word, but for the legacy one, whose wording says what to do about it
(KAI's names each node, which would make one reason per node).
"""

from __future__ import annotations

import enum
import functools
import weakref
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kai_ray.model import MigMode, is_mig_resource, profile_gpus
from placement.node_table import NodeTable
from placement.shapes import CORE_COLUMNS, ResourceSchema, TaskShape

Mask = npt.NDArray[np.bool_]

NOT_MIG_NODE = "MIG job cannot be scheduled on non-MIG node"
SINGLE_STRATEGY_ONLY_WHOLE = "only whole gpu jobs can run on a node with MigStrategy='single'"
MIXED_STRATEGY_ONLY_MIG = "non MIG jobs cant run on a node with MigStrategy='mixed'"
LEGACY_MIG_REFUSED = (
    "node(s) refused it: Legacy MIG jobs cannot be scheduled (the pod asks for MIG in an annotation; "
    "ask for the profile in its resources instead)"
)


class GpuKind(enum.Enum):
    CPU_ONLY = "cpu-only"
    WHOLE = "whole"  # whole GPUs (nvidia.com/gpu)
    SHARED = "shared"  # a GPU fraction or GPU memory
    MIG = "mig"  # MIG profiles (nvidia.com/mig-*), whatever else it asks
    LEGACY_MIG = "legacy-mig"  # a MIG profile asked for in an annotation


def gpu_kind(shape: TaskShape) -> GpuKind:
    """How KAI classes the pod's GPU request: a legacy MIG pod is refused before any other
    check, then a MIG profile wins over everything else."""
    if shape.legacy_mig:
        return GpuKind.LEGACY_MIG
    if shape.request.scalars and any(is_mig_resource(name) for name in shape.request.scalars):
        return GpuKind.MIG
    if shape.share is not None:
        return GpuKind.SHARED
    return GpuKind.WHOLE if shape.request.gpu > 0 else GpuKind.CPU_ONLY


def mig_modes(table: NodeTable) -> npt.NDArray[np.int8]:
    """Every row's ``MigMode`` (0 for an empty row)."""
    return table.mig_mode


def mig_enabled(table: NodeTable) -> Mask:
    enabled: Mask = table.mig_mode != MigMode.NONE
    return enabled


# Per table, as of the table's static epoch (a node's mode changes only with its labels or
# resources, which bump it): whether any row is a MIG node, and the rows each kind of request may
# use (only clusters with MIG nodes need those). Placement asks for every row it fits a GPU pod
# on, a victim search thousands of times per job: a pass over the modes each time was most of it.
@dataclass(slots=True)
class _Accepted:
    stamp: tuple[int, int]
    any_mig: bool
    masks: dict[GpuKind, Mask] = field(default_factory=dict)


_ACCEPTED: weakref.WeakKeyDictionary[NodeTable, _Accepted] = weakref.WeakKeyDictionary()


def refusal(kind: GpuKind, mode: int) -> str | None:
    """KAI's message when a node of ``mode`` refuses a pod of ``kind``; None when it takes it."""
    if kind is GpuKind.LEGACY_MIG:
        return LEGACY_MIG_REFUSED
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
    cluster without MIG nodes and a pod that asks for no MIG profile, answered without a pass
    over the rows). Read only."""
    kind = gpu_kind(shape)
    if kind is GpuKind.CPU_ONLY:
        return None
    modes = table.mig_mode
    stamp = (table.static_epoch, len(modes))
    known = _ACCEPTED.get(table)
    if known is None or known.stamp != stamp:  # an older epoch's masks are never asked again
        known = _ACCEPTED[table] = _Accepted(stamp, bool(modes.any()))
    if kind not in (GpuKind.MIG, GpuKind.LEGACY_MIG) and not known.any_mig:
        return None
    mask = known.masks.get(kind)
    if mask is None:
        refused = [mode for mode in MigMode if refusal(kind, mode) is not None]
        mask = ~np.isin(modes, refused)
        mask.flags.writeable = False
        known.masks[kind] = mask
    return mask


def refusal_counts(table: NodeTable, shape: TaskShape, rows: Mask) -> dict[str, int]:
    """How many of ``rows`` refuse ``shape``, by KAI's message."""
    kind = gpu_kind(shape)
    counts: dict[str, int] = {}
    if kind is GpuKind.CPU_ONLY:
        return counts
    modes = table.mig_mode
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
