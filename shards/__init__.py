"""Node shards: partitions of the cluster's nodes as numpy arrays, vectorized filter and score;
each places pods and holds them for the coordinator until it commits or releases them.

``__all__`` is what the coordinator, the wiring and the benchmarks may use; import it from here
or from the module that defines it. ``partitioner`` (which shard owns which node) is public as
a module.
"""

from shards import partitioner, wire
from shards.constraints import tolerates_all
from shards.diagnosis import Diagnosis
from shards.domain_index import Rows, best_in
from shards.dra_cel import SELECTORS
from shards.dra_demand import ClaimDemand, ClaimSpec, RequestSpec, claim_demand, claim_key
from shards.dra_devices import Allocation, DeviceBook, Held
from shards.handover import ShardHandover
from shards.messages import ClaimHold, NodeDevices, Placement, PrepareItem, PrepareReply, RowChanges, ShardDeltas
from shards.node_table import Holding, Kind, NodeTable
from shards.placement import Choice, Mask, PlacementPolicy, Placer
from shards.pod_holds import pod_hold
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
from shards.rows import NodeRows, load_rows, merge_rows, table_from_rows
from shards.shape_index import ShapeIndex
from shards.shapes import CPU, GPU, MEMORY, PODS, Constraints, ResourceSchema, TaskShape
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
from shards.topology_domains import DomainReport, domain_report

__all__ = [
    "CPU",
    "SELECTORS",
    "Allocation",
    "ClaimDemand",
    "ClaimHold",
    "ClaimSpec",
    "DeviceBook",
    "Held",
    "NodeDevices",
    "RequestSpec",
    "claim_demand",
    "claim_key",
    "GPU",
    "MEMORY",
    "PODS",
    "Choice",
    "Constraints",
    "Diagnosis",
    "DomainReport",
    "Holding",
    "Kind",
    "Mask",
    "NodeRows",
    "NodeTable",
    "Placement",
    "PlacementPolicy",
    "Placer",
    "PrepareItem",
    "PrepareReply",
    "Abort",
    "ApplyDeltas",
    "Batch",
    "BatchReply",
    "Changes",
    "Commit",
    "Describe",
    "Domains",
    "Expire",
    "HandOver",
    "Load",
    "Prepare",
    "Reservation",
    "ReservationState",
    "Round",
    "RowsOf",
    "Settle",
    "ShardHandover",
    "Shares",
    "TakeOver",
    "load_rows",
    "wire",
    "Binds",
    "RoundReply",
    "RoundRequest",
    "RowChanges",
    "SettleReply",
    "SettleRequest",
    "ShapeStream",
    "ShardDown",
    "ShardInfo",
    "ShardRequest",
    "StaleEpoch",
    "Taken",
    "ResourceSchema",
    "Rows",
    "ShapeIndex",
    "Shard",
    "ShardDeltas",
    "TaskShape",
    "best_in",
    "domain_report",
    "merge_rows",
    "partitioner",
    "pod_hold",
    "table_from_rows",
    "tolerates_all",
]
