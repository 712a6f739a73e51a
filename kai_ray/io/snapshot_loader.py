"""Snapshot input (DESIGN §5.2): manifests in, a validated ClusterSnapshot out.

Malformed input raises InputError with a one-line message naming the object and the
field. Cluster states that KAI tolerates are not errors: orphan queues are dropped
with a warning, unknown kinds are skipped and counted, and pods that name a missing
queue or PodGroup are kept (the session leaves them pending with a reason).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kai_ray import labels as L
from kai_ray.errors import InputError
from kai_ray.grouping import OwnerRef, implicit_group
from kai_ray.io.documents import iter_objects, parse_documents, read_text
from kai_ray.io.fields import ObjectReader
from kai_ray.io.parse_core import parse_node, parse_pod
from kai_ray.io.parse_kai import RawPodGroup, parse_pod_group, parse_priority_class, parse_queue
from kai_ray.io.pod_groups import implicit, resolve
from kai_ray.io.queue_tree import classify
from kai_ray.model import ClusterSnapshot, LoadReport, Node, Pod, PodGroup, PriorityClass, Queue


def load_snapshot(path: str | Path, scheduler_name: str = L.DEFAULT_SCHEDULER_NAME) -> ClusterSnapshot:
    text = read_text(path)
    documents = parse_documents(text, str(path))
    if not documents:
        # An empty cluster is written as an empty List; a file with no document at all is
        # nearly always a failed `kubectl get ... > file`, so it is refused rather than scheduled.
        raise InputError(f"{path}: no Kubernetes objects (an empty cluster is a List with no items)")
    return snapshot_from_documents(documents, str(path), scheduler_name)


def snapshot_from_documents(
    documents: list[Any],
    source: str = "<input>",
    scheduler_name: str = L.DEFAULT_SCHEDULER_NAME,
) -> ClusterSnapshot:
    nodes: dict[str, Node] = {}
    pods: dict[str, Pod] = {}
    owners: dict[str, tuple[OwnerRef, ...]] = {}
    raw_groups: dict[str, RawPodGroup] = {}
    queues: dict[str, Queue] = {}
    classes: dict[str, PriorityClass] = {}
    skipped: Counter[str] = Counter()
    warnings: list[str] = []
    for index, doc in iter_objects(documents, source):
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise InputError(f"{source}: document {index}: kind: missing")
        api_version = str(doc.get("apiVersion") or "")
        api_group = api_version.split("/")[0] if "/" in api_version else ""
        reader = ObjectReader(doc, index)
        _check_version(kind, api_group, api_version, reader)
        if kind == "Node" and api_group == "":
            _put(nodes, reader.name, parse_node(reader), reader, False)
        elif kind == "Pod" and api_group == "":
            pod = parse_pod(reader, warnings)
            _put(pods, pod.key, pod, reader, True)
            owners[pod.key] = _owner_refs(reader)
        elif kind == "Queue" and api_group == "scheduling.run.ai":
            _put(queues, reader.name, parse_queue(reader, warnings), reader, False)
        elif kind == "PodGroup" and api_group == "scheduling.run.ai":
            group = parse_pod_group(reader)
            _put(raw_groups, f"{group.namespace}/{group.name}", group, reader, True)
        elif kind == "PriorityClass" and api_group == "scheduling.k8s.io":
            _put(classes, reader.name, parse_priority_class(reader), reader, False)
        else:
            skipped[kind] += 1
    kept_queues, unusable_queues = _valid_queue_tree(queues, warnings)
    groups = _resolve_groups(raw_groups, pods, owners, classes, warnings, scheduler_name)
    return ClusterSnapshot(
        nodes=tuple(nodes.values()),
        pods=tuple(pods.values()),
        pod_groups=tuple(groups),
        queues=tuple(kept_queues),
        priority_classes=tuple(classes.values()),
        report=LoadReport(dict(sorted(skipped.items())), tuple(warnings)),
        unusable_queues=unusable_queues,
    )


# The versions of each kind this reader understands: another version of a kind it knows could
# mean other fields (or the same fields meaning other things), so it is refused, not guessed at.
READ_VERSIONS = {
    ("Node", ""): ("v1",),
    ("Pod", ""): ("v1",),
    ("Queue", "scheduling.run.ai"): ("scheduling.run.ai/v2",),
    ("PodGroup", "scheduling.run.ai"): ("scheduling.run.ai/v2alpha2",),
    ("PriorityClass", "scheduling.k8s.io"): ("scheduling.k8s.io/v1",),
}


def _check_version(kind: str, group: str, api_version: str, reader: ObjectReader) -> None:
    versions = READ_VERSIONS.get((kind, group))
    if versions is not None and api_version not in versions:
        namespaced = kind in ("Pod", "PodGroup")
        raise reader.fail(
            "apiVersion",
            f"{api_version or '(missing)'!r} is not read; kai-ray reads {kind} as {', '.join(versions)}",
            namespaced,
        )


def _put(store: dict[str, Any], key: str, value: Any, reader: ObjectReader, namespaced: bool) -> None:
    if key in store:
        raise reader.fail("metadata.name", "appears twice in the snapshot", namespaced)
    store[key] = value


def _owner_refs(reader: ObjectReader) -> tuple[OwnerRef, ...]:
    refs = []
    for ref in reader.sequence("metadata.ownerReferences"):
        if isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") and ref.get("name"):
            refs.append(OwnerRef(str(ref["kind"]), str(ref["name"]), str(ref.get("uid") or "")))
    return tuple(refs)


def _valid_queue_tree(queues: dict[str, Queue], warnings: list[str]) -> tuple[list[Queue], dict[str, str]]:
    """Refuse cycles (a snapshot is input to fix); drop orphans as KAI does, with a warning each.
    Returns the tree's queues and the dropped ones with why."""
    forest = classify(queues)
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
) -> list[PodGroup]:
    members: dict[str, list[Pod]] = {}
    for pod in pods.values():
        if pod.pod_group:
            members.setdefault(f"{pod.namespace}/{pod.pod_group}", []).append(pod)
    groups = [resolve(raw, members.get(key, ()), classes, warnings) for key, raw in raw_groups.items()]
    # Pods of ours that name no PodGroup get the one KAI's pod grouper would create.
    implicit_members: dict[str, list[Pod]] = {}
    for key, pod in list(pods.items()):
        if pod.pod_group or pod.scheduler_name != scheduler_name:
            continue
        name = implicit_group(pod, owners.get(key, ())).name
        implicit_members.setdefault(f"{pod.namespace}/{name}", []).append(pod)
        pods[key] = replace(pod, pod_group=name)
    # A PodGroup object of the same name wins (the pod grouper made it; the pods are not annotated yet).
    groups.extend(
        implicit(found, owners, classes, warnings) for k, found in implicit_members.items() if k not in raw_groups
    )
    return groups
