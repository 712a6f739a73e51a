"""What a pod that is already placed holds on its node, in node-table terms."""

from __future__ import annotations

from dataclasses import dataclass

from kai_ray.model import Pod, PodState
from placement.holdings import Kind, Vector
from placement.node_table import NodeTable
from placement.placer import share_mib
from placement.shapes import GPU

KIND_OF_STATE = {
    PodState.RUNNING: Kind.ACTIVE,
    PodState.BINDING: Kind.ACTIVE,
    PodState.RELEASING: Kind.RELEASING,
    PodState.PIPELINED: Kind.PIPELINED,
}


@dataclass(frozen=True, slots=True)
class PodHold:
    row: int
    kind: Kind
    vector: Vector
    shares: tuple[tuple[str, int], ...]


def pod_hold(table: NodeTable, pod: Pod) -> PodHold | None:
    """The hold of a placed pod, or None when it holds nothing on a node of this table."""
    kind = KIND_OF_STATE.get(pod.state)
    if kind is None or pod.node is None:
        return None
    row = table.index.get(pod.node)
    if row is None:
        return None
    vector = table.schema.vector(pod.requests)
    shares: tuple[tuple[str, int], ...] = ()
    if pod.gpu_share is not None:
        vector[GPU] = 0.0
        mib = int(share_mib(pod.gpu_share, table.gpu_mem[row : row + 1])[0])
        groups = pod.gpu_groups or tuple(f"{pod.name}-gpu{i}" for i in range(pod.gpu_share.devices))
        shares = tuple((g, mib) for g in groups)
    return PodHold(row, kind, vector, shares)
