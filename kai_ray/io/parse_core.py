"""Core Kubernetes kinds (Node, Pod) into model records."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kai_ray import labels as L
from kai_ray.errors import InputError
from kai_ray.io.fields import ObjectReader, dict_or_absent, text_map
from kai_ray.io.legacy_mig import legacy_mig_annotation, legacy_mig_requests, legacy_mig_warning
from kai_ray.io.parse_dra import parse_pod_claims
from kai_ray.io.parse_workload import WORKLOAD_GROUP_FIELDS, workload_gang
from kai_ray.io.requests import pod_requests, resource_vector
from kai_ray.model import (
    GPU_RESOURCE,
    AffinityTerm,
    GpuShare,
    Node,
    Pod,
    PodState,
    ResourceVector,
    SelectorRequirement,
    Taint,
    Toleration,
    fast_init,
    lists_mig_profile,
    node_mig_mode,
)
from kai_ray.quantity import QuantityError, plain

# Pods of one workload tolerate the same taints: one (immutable) record per distinct toleration.
_MAX_TOLERATIONS = 4096
_TOLERATIONS: dict[tuple[str, str, str, str], Toleration] = {}
# A snapshot's pods are made by the thousand: the record's own initializer is most of the cost.
_make_pod = fast_init(Pod)


def parse_node(reader: ObjectReader, mig_label_key: str = L.MIG_ENABLED_NODE_LABEL) -> Node:
    """A node record; ``mig_label_key`` is the label that marks a MIG node (the config's
    ``migWorkerNodeLabelKey``)."""
    status = reader.mapping("status", namespaced=False)
    raw = status.get("allocatable") or status.get("capacity")
    if not isinstance(raw, Mapping):
        problem = "missing" if raw is None else "must be a mapping"
        raise reader.fail("status.allocatable", problem, namespaced=False)
    allocatable = resource_vector(reader, "status.allocatable", raw, namespaced=False)
    if allocatable.pods == 0 and "pods" not in raw:
        allocatable = ResourceVector.of(allocatable.cpu, allocatable.memory, allocatable.gpu, 110, allocatable.scalars)
    node_labels = reader.string_map("metadata.labels", namespaced=False)
    taints = []
    for i, taint in enumerate(reader.sequence("spec.taints", namespaced=False)):
        if not isinstance(taint, Mapping) or not taint.get("key"):
            raise reader.fail(f"spec.taints[{i}].key", "missing", namespaced=False)
        taints.append(Taint(str(taint["key"]), str(taint.get("value") or ""), str(taint.get("effect") or "NoSchedule")))
    ready = True
    for condition in reader.sequence("status.conditions", namespaced=False):
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = str(condition.get("status")) == "True"
    gpu_memory = float(L.DEFAULT_GPU_MEMORY_MIB)
    if L.GPU_MEMORY_NODE_LABEL in node_labels:
        try:
            gpu_memory = max(float(L.DEFAULT_GPU_MEMORY_MIB), plain(node_labels[L.GPU_MEMORY_NODE_LABEL]) // 100 * 100)
        except QuantityError:
            raise reader.fail(f"metadata.labels.{L.GPU_MEMORY_NODE_LABEL}", "not a number", namespaced=False) from None
    return Node(
        name=reader.name,
        allocatable=allocatable,
        labels=node_labels,
        taints=tuple(taints),
        ready=ready,
        unschedulable=bool(reader.get("spec.unschedulable", False)),
        gpu_memory_mib=gpu_memory,
        # Worked out here, where the profiles listed with a count of zero are still seen.
        mig_mode=node_mig_mode(node_labels, lists_mig_profile(raw), mig_label_key),
    )


def _whole_gpus(reader: ObjectReader, requests: ResourceVector, lenient: list[str] | None) -> ResourceVector:
    """Devices are whole (fractions go through annotations); a placed pod is counted rounded up."""
    if requests.gpu == int(requests.gpu):
        return requests
    problem = reader.fail(
        f"spec.containers[*].resources.requests.{GPU_RESOURCE}", f"must be a whole number of GPUs, got {requests.gpu:g}"
    )
    if lenient is None:
        raise problem
    lenient.append(f"{problem}; counted as {math.ceil(requests.gpu)} GPUs while it holds its node")
    return ResourceVector.of(requests.cpu, requests.memory, math.ceil(requests.gpu), 1, requests.scalars)


def _gpu_share(reader: ObjectReader, annotations: Mapping[str, str], whole_gpus: float) -> GpuShare | None:
    fraction_text = annotations.get(L.GPU_FRACTION_ANNOTATION)
    memory_text = annotations.get(L.GPU_MEMORY_ANNOTATION)
    if fraction_text is None and memory_text is None:
        return None
    path = "metadata.annotations"
    if whole_gpus:
        shared = L.GPU_FRACTION_ANNOTATION if fraction_text is not None else L.GPU_MEMORY_ANNOTATION
        raise reader.fail(
            f"{path}.{shared}",
            f"{(fraction_text if fraction_text is not None else memory_text)!r} together with {whole_gpus:g} "
            f"{GPU_RESOURCE}: a pod may not request whole GPUs and a GPU fraction or GPU memory",
        )
    if fraction_text is not None and memory_text is not None:
        raise reader.fail(path, f"set only one of {L.GPU_FRACTION_ANNOTATION} and {L.GPU_MEMORY_ANNOTATION}")
    devices_text = annotations.get(L.GPU_FRACTION_DEVICES_ANNOTATION, "1")
    try:
        devices = int(devices_text)
    except ValueError:
        raise reader.fail(f"{path}.{L.GPU_FRACTION_DEVICES_ANNOTATION}", f"not an integer: {devices_text!r}") from None
    if devices < 1:
        raise reader.fail(f"{path}.{L.GPU_FRACTION_DEVICES_ANNOTATION}", f"must be at least 1, got {devices_text!r}")
    if fraction_text is not None:
        try:
            fraction = float(fraction_text)
        except ValueError:
            raise reader.fail(f"{path}.{L.GPU_FRACTION_ANNOTATION}", f"not a number: {fraction_text!r}") from None
        if not 0 < fraction <= 1:
            raise reader.fail(f"{path}.{L.GPU_FRACTION_ANNOTATION}", f"must be in (0, 1], got {fraction_text}")
        return GpuShare(fraction=fraction, devices=devices)
    assert memory_text is not None
    try:
        memory = int(plain(memory_text))
    except (QuantityError, ValueError):
        raise reader.fail(f"{path}.{L.GPU_MEMORY_ANNOTATION}", f"not a number: {memory_text!r}") from None
    if memory <= 0:
        raise reader.fail(f"{path}.{L.GPU_MEMORY_ANNOTATION}", f"must be positive, got {memory_text!r}")
    return GpuShare(memory_mib=memory, devices=devices)


def _affinity(reader: ObjectReader) -> tuple[AffinityTerm, ...]:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    terms: list[AffinityTerm] = []
    for i, term in enumerate(reader.sequence(path)):
        if not isinstance(term, Mapping):
            raise reader.fail(f"{path}[{i}]", "must be a mapping")
        requirements: list[SelectorRequirement] = []
        for section, is_field in (("matchExpressions", False), ("matchFields", True)):
            for j, expr in enumerate(term.get(section) or []):
                where = f"{path}[{i}].{section}[{j}]"
                if not isinstance(expr, Mapping) or not expr.get("key") or not expr.get("operator"):
                    raise reader.fail(where, "needs key and operator")
                operator = str(expr["operator"])
                if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                    raise reader.fail(f"{where}.operator", f"unknown operator {operator!r}")
                values = tuple(str(v) for v in expr.get("values") or ())
                requirements.append(SelectorRequirement(str(expr["key"]), operator, values, is_field))
        terms.append(tuple(requirements))
    return tuple(terms)


def _tolerations(reader: ObjectReader) -> tuple[Toleration, ...]:
    result = []
    for i, tol in enumerate(reader.sequence("spec.tolerations")):
        if not isinstance(tol, Mapping):
            raise reader.fail(f"spec.tolerations[{i}]", "must be a mapping")
        result.append(_toleration(tol))
    return tuple(result)


def _toleration(tol: Mapping[str, Any]) -> Toleration:
    fields = (
        str(tol.get("key") or ""),
        str(tol.get("operator") or "Equal"),
        str(tol.get("value") or ""),
        str(tol.get("effect") or ""),
    )
    toleration = _TOLERATIONS.get(fields)
    if toleration is None:
        if len(_TOLERATIONS) >= _MAX_TOLERATIONS:
            _TOLERATIONS.clear()
        toleration = _TOLERATIONS[fields] = Toleration(*fields)
    return toleration


def pod_state(reader: ObjectReader) -> tuple[PodState, str | None]:
    return _state(
        reader.get("status.phase", "Pending"),
        reader.get("spec.nodeName") or None,
        reader.meta.get("deletionTimestamp"),
        reader.get("status.nominatedNodeName") or None,
    )


def _state(phase: Any, node_name: Any, deleting: Any, nominated: Any) -> tuple[PodState, str | None]:
    if phase == "Succeeded":
        return PodState.SUCCEEDED, node_name
    if phase == "Failed":
        return PodState.FAILED, node_name
    if deleting:
        return PodState.RELEASING, node_name
    if node_name:
        return PodState.RUNNING, node_name
    if nominated:
        return PodState.PIPELINED, nominated
    return PodState.PENDING, None


def _gpu_groups(pod_labels: Mapping[str, str]) -> tuple[str, ...]:
    groups: list[str] = []
    first = pod_labels.get(L.GPU_GROUP_LABEL)
    if first:
        groups.append(first)
    prefix = L.GPU_GROUP_LABEL + "/"
    numbered = [key for key in pod_labels if key.startswith(prefix)]  # nearly always none
    for key in sorted(numbered):
        value = pod_labels[key]
        if value and value not in groups:
            groups.append(value)
    return tuple(groups)


def _placed_share(
    reader: ObjectReader,
    annotations: Mapping[str, str],
    requests: ResourceVector,
    groups: tuple[str, ...],
    lenient: list[str] | None,
) -> GpuShare | None:
    """The pod's GPU share; for a pod that holds its node, an unreadable one is not a reason to
    count nothing: whole GPUs it requests count as they are, otherwise each shared GPU it sits
    on (at least one) counts as taken in full."""
    try:
        return _gpu_share(reader, annotations, requests.gpu)
    except InputError as problem:
        if lenient is None:
            raise
        if requests.gpu:
            lenient.append(f"{problem}; ignored, its {requests.gpu:g} whole GPUs are counted")
            return None
        devices = max(1, len(groups))
        lenient.append(f"{problem}; counted as {devices} whole GPU{'s' if devices > 1 else ''} while it holds its node")
        return GpuShare(fraction=1.0, devices=devices)


def parse_pod(reader: ObjectReader, lenient: list[str] | None = None) -> Pod:
    """A pod record. With ``lenient`` (a list for warnings), a pod that holds its node is never
    refused for what kai-ray alone reads (GPU-sharing annotations, task priority, fractional GPU
    counts): it is counted with its whole request and each problem is a warning in the list.
    Other pods, and unreadable resource quantities, still raise."""
    common = _common_pod(reader)
    if common is not None:
        return common
    pod_labels = reader.string_map("metadata.labels")
    annotations = reader.string_map("metadata.annotations")
    state, node = pod_state(reader)
    holds = lenient if node is not None and state in (PodState.RUNNING, PodState.RELEASING) else None
    requests = _whole_gpus(reader, pod_requests(reader), holds)
    task_priority = None
    if L.TASK_PRIORITY_LABEL in pod_labels:
        try:
            task_priority = int(pod_labels[L.TASK_PRIORITY_LABEL])
        except ValueError:
            problem = reader.fail(
                f"metadata.labels.{L.TASK_PRIORITY_LABEL}", f"not an integer: {pod_labels[L.TASK_PRIORITY_LABEL]!r}"
            )
            if holds is None:
                raise problem from None
            holds.append(f"{problem}; ignored")
    groups = _gpu_groups(pod_labels)
    legacy = legacy_mig_annotation(annotations)
    if legacy is not None:
        requests = legacy_mig_requests(requests, legacy, int(annotations[legacy]))
        if lenient is not None:
            lenient.append(legacy_mig_warning(reader, legacy, annotations[legacy], holds is not None))
    gang = workload_gang(reader, annotations, lenient)
    return Pod(
        namespace=reader.namespace,
        name=reader.name,
        uid=str(reader.meta.get("uid") or ""),
        scheduler_name=str(reader.get("spec.schedulerName", "default-scheduler")),
        state=state,
        node=node,
        requests=requests,
        gpu_share=None if legacy is not None else _placed_share(reader, annotations, requests, groups, holds),
        gpu_groups=groups,
        labels=pod_labels,
        annotations=annotations,
        node_selector=reader.string_map("spec.nodeSelector"),
        affinity=_affinity(reader),
        tolerations=_tolerations(reader),
        created=reader.timestamp("metadata.creationTimestamp", reader.meta.get("creationTimestamp")) or 0.0,
        pod_group=gang or annotations.get(L.POD_GROUP_ANNOTATION) or None,
        queue_label=_queue_label(pod_labels),
        subgroup=pod_labels.get(L.SUBGROUP_LABEL) or None,
        task_priority=task_priority,
        is_leader=_is_leader(pod_labels),
        priority_class_name=reader.get("spec.priorityClassName") or pod_labels.get(L.PRIORITY_CLASS_LABEL) or None,
        resource_claims=parse_pod_claims(reader),
        scheduling_gates=_gates(reader.get("spec.schedulingGates")),
        workload_gang=gang is not None,
        legacy_mig=legacy,
    )


# How a pod names its group in the Kubernetes Workload API: spec.workloadRef (1.35, replaced in
# 1.36 and not read), spec.schedulingGroup (1.36 on: the name of a scheduling.k8s.io PodGroup).
def _queue_label(pod_labels: Mapping[str, str]) -> str | None:
    return pod_labels.get(L.QUEUE_LABEL) or pod_labels.get(L.LEGACY_QUEUE_LABEL) or None


def _is_leader(pod_labels: Mapping[str, str]) -> bool:
    return pod_labels.get(L.KUBEFLOW_ROLE_LABEL) in ("master", "launcher") or (
        pod_labels.get(L.RAY_NODE_TYPE_LABEL) == "head"
    )


def _common_pod(reader: ObjectReader) -> Pod | None:
    """The pod, when it has the shape nearly every pod has: mappings where mappings belong, no
    GPU-sharing annotation or task priority, whole GPUs. Read as ``parse_pod`` reads it, without
    walking a dotted path per field. None for any other pod, and for one that would be refused
    or warned about: ``parse_pod`` then reads it field by field and says what is wrong."""
    doc, meta = reader.doc, reader.meta
    spec, status = doc.get("spec"), doc.get("status")
    if type(spec) is not dict:
        return None
    labels, annotations = meta.get("labels"), meta.get("annotations")
    node_selector, tolerations = spec.get("nodeSelector"), spec.get("tolerations")
    if not (
        dict_or_absent(status)
        and dict_or_absent(labels)
        and dict_or_absent(annotations)
        and dict_or_absent(node_selector)
        and (tolerations is None or type(tolerations) is list)
    ):
        return None
    pod_labels = text_map(labels)
    pod_annotations = text_map(annotations)
    if (
        L.TASK_PRIORITY_LABEL in pod_labels
        or L.GPU_FRACTION_ANNOTATION in pod_annotations
        or L.GPU_MEMORY_ANNOTATION in pod_annotations
        or legacy_mig_annotation(pod_annotations) is not None
    ):
        return None
    if tolerations and not all(type(tol) is dict for tol in tolerations):
        return None
    if any(field in spec for field in WORKLOAD_GROUP_FIELDS):  # warned about by parse_pod
        return None
    try:
        requests = pod_requests(reader)
        affinity = _affinity(reader) if "affinity" in spec else ()
        created = reader.timestamp("metadata.creationTimestamp", meta.get("creationTimestamp")) or 0.0
        has_claims = "resourceClaims" in spec or "resourceClaimStatuses" in (status or ())
        claims = parse_pod_claims(reader) if has_claims else ()
    except InputError:
        return None
    if requests.gpu != int(requests.gpu):
        return None
    status = status or {}
    phase = status.get("phase")
    state, node = _state(
        "Pending" if phase is None else phase,
        spec.get("nodeName") or None,
        meta.get("deletionTimestamp"),
        status.get("nominatedNodeName") or None,
    )
    scheduler_name = spec.get("schedulerName")
    return _make_pod(
        namespace=reader.namespace,
        name=reader.name,
        uid=str(meta.get("uid") or ""),
        scheduler_name=str("default-scheduler" if scheduler_name is None else scheduler_name),
        state=state,
        node=node,
        requests=requests,
        gpu_share=None,
        gpu_groups=_gpu_groups(pod_labels),
        labels=pod_labels,
        annotations=pod_annotations,
        node_selector=text_map(node_selector),
        affinity=affinity,
        tolerations=tuple(_toleration(tol) for tol in tolerations) if tolerations else (),
        created=created,
        pod_group=pod_annotations.get(L.POD_GROUP_ANNOTATION) or None,
        queue_label=_queue_label(pod_labels),
        subgroup=pod_labels.get(L.SUBGROUP_LABEL) or None,
        task_priority=None,
        is_leader=_is_leader(pod_labels),
        priority_class_name=spec.get("priorityClassName") or pod_labels.get(L.PRIORITY_CLASS_LABEL) or None,
        resource_claims=claims,
        scheduling_gates=_gates(spec.get("schedulingGates")) if "schedulingGates" in spec else (),
    )


def _gates(value: object) -> tuple[str, ...]:
    """``spec.schedulingGates`` as names. The API server validates the list (each an object with a
    unique name); a snapshot entry that is not one still counts, so a gated pod is never bound."""
    if not value or not isinstance(value, list):
        return ()
    return tuple(str(gate.get("name") or "") if isinstance(gate, dict) else str(gate) for gate in value)
