"""Node shards: each owns a partition of the cluster's nodes (a ``placement`` node table),
places pods and holds them for the coordinator until it commits or releases them, and answers
the coordinator's typed requests.

``__all__`` is what the coordinator, the wiring and the benchmarks may use; import it from here
or from the module that defines it. ``partitioner`` (which shard owns which node) and ``wire``
(the messages' msgpack parts) are public as modules.
"""

from shards import partitioner, wire
from shards.handover import ShardHandover
from shards.messages import ClaimHold, NodeDevices, Placement, PrepareItem, PrepareReply, RowChanges, ShardDeltas
from shards.protocol import (
    Abort,
    ApplyDeltas,
    Batch,
    BatchReply,
    Changes,
    Commit,
    Describe,
    Domains,
    Expire,
    HandOver,
    HoldsOf,
    Load,
    Prepare,
    Round,
    RowsOf,
    Settle,
    ShardDown,
    ShardInfo,
    ShardRequest,
    StaleEpoch,
    TakeOver,
)
from shards.reservations import Reservation, ReservationState
from shards.shard import Shard
from shards.stream_messages import (
    Binds,
    RoundReply,
    RoundRequest,
    SettleReply,
    SettleRequest,
    ShapeStream,
    Shares,
    Taken,
)

__all__ = [
    "Abort",
    "ApplyDeltas",
    "Batch",
    "BatchReply",
    "Binds",
    "Changes",
    "ClaimHold",
    "Commit",
    "Describe",
    "Domains",
    "Expire",
    "HandOver",
    "HoldsOf",
    "Load",
    "NodeDevices",
    "Placement",
    "Prepare",
    "PrepareItem",
    "PrepareReply",
    "Reservation",
    "ReservationState",
    "Round",
    "RoundReply",
    "RoundRequest",
    "RowChanges",
    "RowsOf",
    "Settle",
    "SettleReply",
    "SettleRequest",
    "ShapeStream",
    "Shard",
    "ShardDeltas",
    "ShardDown",
    "ShardHandover",
    "ShardInfo",
    "ShardRequest",
    "Shares",
    "StaleEpoch",
    "Taken",
    "TakeOver",
    "partitioner",
    "wire",
]
