"""Snapshot input (docs/architecture.md#snapshot-input): manifests in, a validated ClusterSnapshot out.

Malformed input raises InputError with a one-line message naming the object and the
field. Cluster states that KAI tolerates are not errors: orphan queues are dropped
with a warning, unknown kinds are skipped and counted, and pods that name a missing
queue or PodGroup are kept (the session leaves them pending with a reason).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kai_ray import labels as L
from kai_ray.errors import InputError
from kai_ray.io.documents import iter_objects, read_documents
from kai_ray.io.dra_snapshot import DRA_KINDS, DraReader
from kai_ray.io.fields import ObjectReader
from kai_ray.io.kai_snapshot import is_kai_snapshot, read_kai_snapshot
from kai_ray.io.parse_core import parse_node, parse_pod
from kai_ray.io.parse_kai import parse_pod_group, parse_priority_class, parse_queue
from kai_ray.io.parse_topology import parse_topology
from kai_ray.io.parse_workload import READ_VERSIONS as WORKLOAD_API_VERSIONS
from kai_ray.io.parse_workload import parse_gang_pod_group, parse_workload
from kai_ray.io.queue_tree import classify_queues
from kai_ray.model import ClusterSnapshot, LoadReport, Node, Pod, PodGroup, PodState, PriorityClass, Queue, Topology
from pod_grouper.grouping import (
    WORKLOAD_DOC_KINDS,
    ImplicitGroup,
    OwnerRef,
    awaits_own_group,
    controller_refs,
    implicit_group,
    top_owner,
)
from pod_grouper.pod_groups import RawPodGroup, implicit_pod_group, resolve_pod_group
from pod_grouper.workload_api import GangPodGroup, WorkloadObject, gang_raw_group

# Kinds of KAI's API that other APIs name alike (PodGroup, Workload and CompositePodGroup of a
# Workload API version not read): skipped ones are counted with their group, so "1 PodGroup
# skipped" never reads as one of KAI's (or one of the Workload API's that kai-ray reads).
KAI_KIND_NAMES = frozenset({"PodGroup", "Queue", "Topology", "Workload", "CompositePodGroup"})


def load_snapshot(
    path: str | Path,
    scheduler_name: str = L.DEFAULT_SCHEDULER_NAME,
    mig_label_key: str = L.MIG_ENABLED_NODE_LABEL,
) -> ClusterSnapshot:
    """A List or stream of manifests; a KAI ``/get-snapshot`` ZIP is read with its objects (its
    configuration is the caller's business: ``kai_ray.io.kai_snapshot``). ``mig_label_key`` is
    the config's ``migWorkerNodeLabelKey``."""
    with collector_paused():
        return _load_snapshot(path, scheduler_name, mig_label_key)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while a snapshot is read. Reading makes hundreds of thousands of
    dicts, lists and records that all stay alive until the model is built, and each collection
    on the way walks them again to find nothing: about a third of the time it takes. The
    collector is left as it was found (so a caller that paused it keeps it paused)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load_snapshot(path: str | Path, scheduler_name: str, mig_label_key: str) -> ClusterSnapshot:
    if is_kai_snapshot(path):
        kai = read_kai_snapshot(path)
        snapshot = snapshot_from_documents(kai.documents, str(path), scheduler_name, mig_label_key)
        return replace(snapshot, report=replace(snapshot.report, warnings=(*kai.warnings, *snapshot.report.warnings)))
    documents = read_documents(path)
    if not documents:
        # An empty cluster is written as an empty List; a file with no document at all is
        # nearly always a failed `kubectl get ... > file`, so it is refused rather than scheduled.
        raise InputError(f"{path}: no Kubernetes objects (an empty cluster is a List with no items)")
    return snapshot_from_documents(documents, str(path), scheduler_name, mig_label_key)


def snapshot_from_documents(
    documents: list[Any],
    source: str = "<input>",
    scheduler_name: str = L.DEFAULT_SCHEDULER_NAME,
    mig_label_key: str = L.MIG_ENABLED_NODE_LABEL,
) -> ClusterSnapshot:
    nodes: dict[str, Node] = {}
    pods: dict[str, Pod] = {}
    owners: dict[str, tuple[OwnerRef, ...]] = {}
    raw_groups: dict[str, RawPodGroup] = {}
    queues: dict[str, Queue] = {}
    classes: dict[str, PriorityClass] = {}
    binding: dict[str, tuple[str, tuple[str, ...]]] = {}  # pod -> (node, GPU groups) of its BindRequest
    topologies: dict[str, Topology] = {}
    workloads: dict[tuple[str, str, str], Any] = {}  # owner objects, for KAI's per-kind grouping rules
    gangs: dict[str, GangPodGroup] = {}  # the Kubernetes Workload API's PodGroups and Workloads
    gang_workloads: dict[str, WorkloadObject] = {}
    skipped: Counter[str] = Counter()
    warnings: list[str] = []
    dra = DraReader()
    for index, doc in iter_objects(documents, source):
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError(f"{source}: document {index}: kind: missing")
        api_version = str(doc.get("apiVersion") or "")
        api_group = api_version.split("/")[0] if "/" in api_version else ""
        reader = ObjectReader(doc, index)
        _check_version(kind, api_group, api_version, reader)
        if kind == "Node" and api_group == "":
            _put(nodes, reader.name, parse_node(reader, mig_label_key), reader, False)
        elif kind == "Pod" and api_group == "" and L.is_reservation_pod(_labels(reader.meta)):
            skipped["Pod (GPU reservation)"] += 1
        elif kind == "Pod" and api_group == "":
            pod = parse_pod(reader, warnings)
            key = pod.key
            _put(pods, key, pod, reader, True)
            owners[key] = controller_refs(reader.sequence("metadata.ownerReferences"))
        elif kind == "Queue" and api_group == "scheduling.run.ai":
            _put(queues, reader.name, parse_queue(reader, warnings), reader, False)
        elif kind == "PodGroup" and api_group == "scheduling.run.ai":
            group = parse_pod_group(reader, warnings)
            _put(raw_groups, f"{group.namespace}/{group.name}", group, reader, True)
        elif kind == "PriorityClass" and api_group == "scheduling.k8s.io":
            _put(classes, reader.name, parse_priority_class(reader), reader, False)
        elif kind == "BindRequest" and api_group == "scheduling.run.ai":
            request = _bind_request(reader)
            if request is not None:
                binding[request[0]] = request[1]
        elif kind == "Topology" and api_group == "kai.scheduler":
            _put(topologies, reader.name, parse_topology(reader), reader, False)
        elif api_group == "resource.k8s.io" and kind in DRA_KINDS:
            dra.add(kind, reader)
        elif kind == "PodGroup" and api_version in WORKLOAD_API_VERSIONS:
            gang = parse_gang_pod_group(reader, api_version, warnings)
            _put(gangs, gang.key, gang, reader, True)
        elif kind == "Workload" and api_version in WORKLOAD_API_VERSIONS:
            workload = parse_workload(reader, warnings)
            _put(gang_workloads, workload.key, workload, reader, True)
        elif kind in KAI_KIND_NAMES:  # the name of a kind kai-ray reads, from another API group or version
            skipped[f"{kind} ({api_version if api_group == 'scheduling.k8s.io' else api_group or 'core'})"] += 1
        else:
            skipped[kind] += 1
            if kind in WORKLOAD_DOC_KINDS and (kind != "Service" or api_group == "serving.knative.dev"):
                workloads[(reader.namespace, kind, reader.name)] = doc
    _apply_bind_requests(pods, binding)
    resolved = dra.resolve(pods)
    kept_queues, unusable_queues = _valid_queue_tree(queues, warnings)
    raw_groups.update(_workload_api_groups(gangs, gang_workloads, raw_groups, warnings))
    groups = _resolve_groups(raw_groups, pods, owners, classes, warnings, scheduler_name, workloads, skipped)
    return ClusterSnapshot(
        nodes=tuple(nodes.values()),
        pods=tuple(pods.values()),
        pod_groups=tuple(groups),
        queues=tuple(kept_queues),
        priority_classes=tuple(classes.values()),
        report=LoadReport(dict(sorted(skipped.items())), tuple(warnings)),
        unusable_queues=unusable_queues,
        topologies=tuple(topologies.values()),
        dra=resolved,
    )


# The versions of each kind this reader understands: another version of a kind it knows could
# mean other fields (or the same fields meaning other things), so it is refused, not guessed at.
_DRA_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")
READ_VERSIONS = {
    ("Node", ""): ("v1",),
    ("Pod", ""): ("v1",),
    ("Queue", "scheduling.run.ai"): ("scheduling.run.ai/v2",),
    ("PodGroup", "scheduling.run.ai"): ("scheduling.run.ai/v2alpha2",),
    ("BindRequest", "scheduling.run.ai"): ("scheduling.run.ai/v1alpha2",),
    ("PriorityClass", "scheduling.k8s.io"): ("scheduling.k8s.io/v1",),
    ("Topology", "kai.scheduler"): ("kai.scheduler/v1alpha1",),
    **{(kind, "resource.k8s.io"): _DRA_VERSIONS for kind in DRA_KINDS},
}


def _check_version(kind: str, group: str, api_version: str, reader: ObjectReader) -> None:
    versions = READ_VERSIONS.get((kind, group))
    if versions is not None and api_version not in versions:
        namespaced = kind in ("Pod", "PodGroup", "BindRequest", "ResourceClaim", "ResourceClaimTemplate")
        raise reader.fail(
            "apiVersion",
            f"{api_version or '(missing)'!r} is not read; kai-ray reads {kind} as {', '.join(versions)}",
            namespaced,
        )


def _labels(meta: Mapping[str, Any]) -> Mapping[str, str]:
    labels = meta.get("labels")
    return labels if type(labels) is dict or isinstance(labels, Mapping) else {}


def _put(store: dict[str, Any], key: str, value: Any, reader: ObjectReader, namespaced: bool) -> None:
    if key in store:
        raise reader.fail("metadata.name", "appears twice in the snapshot", namespaced)
    store[key] = value


def _bind_request(reader: ObjectReader) -> tuple[str, tuple[str, tuple[str, ...]]] | None:
    """A BindRequest KAI's binder has not failed: (pod key, (selected node, selected GPU groups))."""
    if reader.get("status.phase") == "Failed":
        return None
    pod, node = reader.get("spec.podName"), reader.get("spec.selectedNode")
    if not pod or not node:
        raise reader.fail("spec.selectedNode" if pod else "spec.podName", "missing")
    groups = tuple(str(g) for g in reader.sequence("spec.selectedGPUGroups"))
    return f"{reader.namespace}/{pod}", (str(node), groups)


def _workload_api_groups(
    gangs: Mapping[str, GangPodGroup],
    workloads: Mapping[str, WorkloadObject],
    kai_groups: Mapping[str, RawPodGroup],
    warnings: list[str],
) -> dict[str, RawPodGroup]:
    """The Workload API's gangs as the PodGroups they are scheduled as. A KAI PodGroup of the same
    namespace and name wins: the pods naming either are one group then, and that is said."""
    out = {}
    for key, gang in gangs.items():
        if key in kai_groups:
            warnings.append(
                f"PodGroup {key} ({gang.api_version}): has the name of KAI's PodGroup {key}; the pods "
                "naming either are scheduled in KAI's, without this gang's policy"
            )
            continue
        out[key] = gang_raw_group(gang, workloads)
    return out


def _apply_bind_requests(pods: dict[str, Pod], binding: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
    """KAI holds a pod's place from its BindRequest until the pod is bound: the pod is Binding there."""
    for key, (node, groups) in binding.items():
        pod = pods.get(key)
        if pod is not None and pod.state is PodState.PENDING:
            pods[key] = replace(pod, state=PodState.BINDING, node=node, gpu_groups=groups or pod.gpu_groups)


def _valid_queue_tree(queues: dict[str, Queue], warnings: list[str]) -> tuple[list[Queue], dict[str, str]]:
    """Refuse cycles (a snapshot is input to fix); drop orphans as KAI does, with a warning each.
    Returns the tree's queues and the dropped ones with why."""
    forest = classify_queues(queues)
    for name, cycle in forest.cycles.items():
        raise InputError(f"Queue {name}: spec.parentQueue: cycle {cycle}")
    for name, why in forest.unusable.items():
        warnings.append(f"Queue {name}: dropped, {why}")
    return [queues[name] for name in forest.usable], forest.unusable


def _resolve_groups(
    raw_groups: Mapping[str, RawPodGroup],
    pods: dict[str, Pod],
    owners: Mapping[str, tuple[OwnerRef, ...]],
    classes: Mapping[str, PriorityClass],
    warnings: list[str],
    scheduler_name: str,
    workloads: Mapping[tuple[str, str, str], Any],
    skipped: Counter[str],
) -> list[PodGroup]:
    members: dict[str, list[Pod]] = {}
    for pod in pods.values():
        if pod.pod_group:
            members.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(pod)
    groups = [resolve_pod_group(raw, members.get(key, ()), classes, warnings) for key, raw in raw_groups.items()]
    # Pods of ours that name no PodGroup get the one KAI's pod grouper would create, shaped by
    # KAI's rules for the top owner's kind when the snapshot holds the owner object.
    implicit_members: dict[str, list[Pod]] = {}
    specs: dict[str, ImplicitGroup] = {}
    used: set[tuple[str, str, str]] = set()
    for key, pod in list(pods.items()):
        if pod.scheduler_name != scheduler_name:
            continue
        if pod.pod_group and not awaits_own_group(pod, owners.get(key, ()), raw_groups):
            continue
        chain, top_doc = top_owner(pod.namespace, owners.get(key, ()), workloads)
        revision = pod.labels.get("serving.knative.dev/revision")
        related = workloads.get((pod.namespace, "Revision", revision)) if revision else None
        spec = specs[key] = implicit_group(pod, chain, top_doc, related)
        if top_doc is not None:
            used.add((pod.namespace, chain[-1].kind, chain[-1].name))
        if spec.note and spec.note not in warnings:
            warnings.append(spec.note)
        pod = pods[key] = replace(pod, pod_group=spec.name, subgroup=spec.subgroup or pod.subgroup)
        implicit_members.setdefault(f"{pod.namespace}/{spec.name}", []).append(pod)
    for _, kind, _ in used:  # owner objects that shaped a group were read, not skipped
        skipped[kind] -= 1
        if skipped[kind] <= 0:
            del skipped[kind]
    # A PodGroup object of the same name wins (the pod grouper made it; the pods are not annotated yet).
    groups.extend(
        implicit_pod_group(found, lambda p: specs[p.key], classes, warnings)
        for k, found in implicit_members.items()
        if k not in raw_groups
    )
    return groups
