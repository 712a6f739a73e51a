"""What the coordinator and the shards say to each other, one batched message per phase."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai_ray.model import Device, GpuShare, Node, Pod, ResourceVector
from placement.rows import NodeRows

NodeDevices = tuple[str, tuple[Device, ...]]  # node, every DRA device its slices publish
ClaimHold = tuple[str, str | None, tuple[str, ...]]  # claim key, its node (None: released), device keys


@dataclass(frozen=True, slots=True)
class ShardDeltas:
    """Cluster changes for one shard, applied in order: nodes first, then pods."""

    nodes_upserted: tuple[Node, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    pods_upserted: tuple[Pod, ...] = ()
    pods_removed: tuple[str, ...] = ()
    devices: tuple[NodeDevices, ...] = ()  # DRA: a node's whole device list, after its nodes
    claims: tuple[ClaimHold, ...] = ()  # DRA: claims allocated on (or released from) its nodes

    def __bool__(self) -> bool:
        return bool(
            self.nodes_upserted or self.nodes_removed or self.pods_upserted or self.pods_removed or self.devices
        ) or bool(self.claims)


@dataclass(frozen=True, slots=True)
class RowChanges:
    """The rows of a shard that changed since a mirror last looked, and the nodes it lost."""

    rows: NodeRows
    removed: tuple[str, ...]
    stamp: int  # ask with this next time
    incarnation: int  # which shard object answered (a replaced shard starts its clock over)
    full: bool  # every node of the shard is in ``rows``: the mirror drops the others it has of it


@dataclass(frozen=True, slots=True)
class Placement:
    """One pod of a gang on one node, as the coordinator decided it."""

    pod: str
    node: str
    requests: ResourceVector
    pipelined: bool
    share: GpuShare | None = None
    shares: tuple[tuple[str, int], ...] = ()
    create: tuple[str, ...] = ()
    claims: tuple[tuple[str, tuple[str, ...]], ...] = ()  # DRA claims it allocates: key, device keys


@dataclass(frozen=True, slots=True)
class PrepareItem:
    rid: str
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class PrepareReply:
    held: tuple[str, ...] = ()  # reservation ids held on this shard
    refused: dict[str, str] = field(default_factory=dict)  # reservation id -> why
