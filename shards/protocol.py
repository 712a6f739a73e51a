"""The shard's one entry point: a batch of typed requests in, a batch of replies out.

Everything the coordinator asks of a shard is one of the request types below, and a round
trip carries a ``Batch`` of them (queued cluster changes first, then the phase's request).
The same batch goes to a plain ``Shard`` in this process or to a shard actor, so both
backends share one contract, and a test can fail any call by refusing to deliver a batch.

A batch names the coordinator's epoch. A shard that sees a newer epoch aborts every
reservation an older coordinator left open (no one will ever commit them); a batch from an
older epoch is refused, so a coordinator that lost its place cannot commit anything.
Cluster changes carry a per-shard sequence number and the reply says how far the shard has
applied them: the coordinator keeps every change queued until that acknowledgement, and a
change delivered twice (its first reply was lost) is applied once.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_ray.model import Node, Pod, Topology
from shards.handover import ShardHandover
from shards.messages import ClaimHold, NodeDevices, PrepareItem, ShardDeltas
from shards.stream_messages import RoundRequest, SettleRequest


@dataclass(frozen=True, slots=True)
class ApplyDeltas:
    """Cluster changes numbered ``seq`` (1, 2, ... per shard); reply: None."""

    seq: int
    deltas: ShardDeltas


@dataclass(frozen=True, slots=True)
class Load:
    """Start over from these nodes and the pods placed on them, as the coordinator's model has
    them (a replacement for a shard that died); changes up to ``seq`` count as applied. Reply: None."""

    seq: int
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    devices: tuple[NodeDevices, ...] = ()  # DRA: the nodes' device lists
    claims: tuple[ClaimHold, ...] = ()  # DRA: claims allocated on them


@dataclass(frozen=True, slots=True)
class RowsOf:
    """The current rows of these nodes (None: every node); reply: ``NodeRows``."""

    names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class HoldsOf:
    """What every node holds, without the rest of its row; reply: ``NodeHolds``."""


@dataclass(frozen=True, slots=True)
class Domains:
    """This shard's nodes' domains in each of these Topologies; reply: ``list[DomainReport]``."""

    topologies: tuple[Topology, ...]


@dataclass(frozen=True, slots=True)
class Changes:
    """The rows changed since ``stamp`` of shard incarnation ``incarnation``; reply: ``RowChanges``."""

    stamp: int = 0
    incarnation: int = 0


@dataclass(frozen=True, slots=True)
class Prepare:
    """Reply: ``PrepareReply``."""

    items: tuple[PrepareItem, ...]
    now: float


@dataclass(frozen=True, slots=True)
class Commit:
    """Reply: ``dict[str, bool]``, True for each reservation that is committed (now or before)."""

    rids: tuple[str, ...]
    now: float


@dataclass(frozen=True, slots=True)
class Abort:
    """Reply: ``dict[str, bool]``, True for each reservation that is not committed."""

    rids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Expire:
    """Reply: ``list[str]``, the reservations that expired."""

    now: float


@dataclass(frozen=True, slots=True)
class HandOver:
    """Reply: ``ShardHandover``."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TakeOver:
    """Reply: None."""

    handover: ShardHandover


@dataclass(frozen=True, slots=True)
class Round:
    """Place and hold pods of some shapes (``shards.stream_messages``); reply: ``RoundReply``."""

    request: RoundRequest


@dataclass(frozen=True, slots=True)
class Settle:
    """Commit a proposal's binds and release the rest; reply: ``SettleReply``."""

    request: SettleRequest


@dataclass(frozen=True, slots=True)
class Describe:
    """Reply: ``ShardInfo``."""


ShardRequest = (
    ApplyDeltas
    | Load
    | RowsOf
    | HoldsOf
    | Domains
    | Changes
    | Round
    | Settle
    | Prepare
    | Commit
    | Abort
    | Expire
    | HandOver
    | TakeOver
    | Describe
)


@dataclass(frozen=True, slots=True)
class ShardInfo:
    shard_id: int
    pid: int  # the process the shard lives in (an actor's worker process)
    nodes: int
    pods: int
    open_reservations: int
    epoch: int
    applied_seq: int


@dataclass(frozen=True, slots=True)
class Batch:
    epoch: int
    requests: tuple[ShardRequest, ...]


@dataclass(frozen=True, slots=True)
class BatchReply:
    applied_seq: int  # every change numbered up to this one is applied
    replies: tuple[object, ...] = ()
    stale: bool = False  # the batch came from an older coordinator and was refused
    epoch: int = 0  # the shard's epoch (the newest it has seen)
    cpu: float = 0.0  # CPU seconds the shard spent on the batch (its own thread: placing, holding...)


class ShardDown(Exception):
    """A shard did not answer: its actor died, or a test pulled it. Its state is lost."""

    def __init__(self, shard_id: int, why: str = "") -> None:
        super().__init__(f"shard {shard_id} is down{': ' + why if why else ''}")
        self.shard_id = shard_id


class StaleEpoch(Exception):
    """A shard already serves a newer coordinator: this one must stop scheduling."""
