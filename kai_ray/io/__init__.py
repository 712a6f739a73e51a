"""Readers of kai-ray's input files and of single Kubernetes objects: the snapshot
(docs/architecture.md#snapshot-input), KAI's /get-snapshot ZIP, the scheduler config
(#scheduler-config) and the fair-share input (#fair-share-input). The adapter reads watched
objects with the same parsers, and the queue tree as the snapshot does; PodGroups are resolved
by the pod grouper's rules (``pod_grouper.pod_groups``), which the snapshot loader uses too.

``__all__`` is what other packages may use; import it from here or from the defining module.
"""

from kai_ray.io.config import config_from_mapping, load_config
from kai_ray.io.documents import iter_objects, parse_documents, read_documents, read_text
from kai_ray.io.fairshare_input import FairShareProblem, fairshare_problem_from_mapping, load_fairshare_problem
from kai_ray.io.fields import ObjectReader, parse_time
from kai_ray.io.kai_snapshot import KaiSnapshot, is_kai_snapshot, read_kai_snapshot
from kai_ray.io.parse_core import parse_node, parse_pod, pod_state
from kai_ray.io.parse_dra import parse_device_class, parse_resource_claim, parse_resource_slice
from kai_ray.io.parse_kai import parse_pod_group, parse_priority_class, parse_queue
from kai_ray.io.parse_topology import parse_topology
from kai_ray.io.parse_workload import parse_gang_pod_group, parse_workload
from kai_ray.io.queue_tree import QueueForest, classify_queues
from kai_ray.io.snapshot_loader import load_snapshot, snapshot_from_documents

__all__ = [
    "FairShareProblem",
    "KaiSnapshot",
    "ObjectReader",
    "QueueForest",
    "classify_queues",
    "config_from_mapping",
    "fairshare_problem_from_mapping",
    "is_kai_snapshot",
    "iter_objects",
    "load_config",
    "load_fairshare_problem",
    "load_snapshot",
    "parse_device_class",
    "parse_documents",
    "parse_gang_pod_group",
    "parse_node",
    "parse_pod",
    "parse_pod_group",
    "parse_priority_class",
    "parse_queue",
    "parse_resource_claim",
    "parse_resource_slice",
    "parse_time",
    "parse_topology",
    "parse_workload",
    "pod_state",
    "read_documents",
    "read_kai_snapshot",
    "read_text",
    "snapshot_from_documents",
]
