"""The placement engine: a set of nodes as numpy arrays with every pod's hold on them,
vectorized filter and score, and choosing a node for a pod the way KAI's allocate does.

Both sides of the wire run it: each shard over the nodes it owns, the coordinator over its
mirror of every node (sessions, victim scenarios, topology). It knows nothing of shards,
messages or queues.

``__all__`` is what the shards, the coordinator, the wiring and the benchmarks may use; import
it from here or from the module that defines it.
"""

from placement.constraints import tolerates_all
from placement.diagnosis import Diagnosis
from placement.domain_index import Rows, best_in
from placement.dra_cel import SELECTORS
from placement.dra_demand import ClaimDemand, ClaimSpec, RequestSpec, claim_demand, claim_key
from placement.dra_devices import Allocation, DeviceBook, Held
from placement.holdings import Holding, Kind, Vector
from placement.mig_nodes import mig_gpus_free
from placement.node_table import NodeTable
from placement.placer import Choice, Mask, PlacementPolicy, Placer
from placement.pod_holds import pod_hold
from placement.rows import NodeHolds, NodeRows, export_holds, export_rows, load_rows, merge_rows, table_from_rows
from placement.shape_index import ShapeIndex
from placement.shapes import CPU, GPU, MEMORY, PODS, Constraints, ResourceSchema, TaskShape
from placement.topology_domains import DomainCache, DomainReport, domain_report

__all__ = [
    "CPU",
    "GPU",
    "MEMORY",
    "PODS",
    "SELECTORS",
    "Allocation",
    "Choice",
    "ClaimDemand",
    "ClaimSpec",
    "Constraints",
    "DeviceBook",
    "DomainCache",
    "Diagnosis",
    "DomainReport",
    "Held",
    "Holding",
    "Kind",
    "Mask",
    "NodeHolds",
    "NodeRows",
    "NodeTable",
    "PlacementPolicy",
    "Placer",
    "RequestSpec",
    "ResourceSchema",
    "Rows",
    "ShapeIndex",
    "TaskShape",
    "Vector",
    "best_in",
    "claim_demand",
    "claim_key",
    "domain_report",
    "export_holds",
    "export_rows",
    "load_rows",
    "merge_rows",
    "mig_gpus_free",
    "pod_hold",
    "table_from_rows",
    "tolerates_all",
]
