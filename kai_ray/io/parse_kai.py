"""KAI's kinds (Queue, PodGroup) and PriorityClass into model records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_ray import labels as L
from kai_ray.io.fields import ObjectReader, dict_or_absent, text_map
from kai_ray.io.parse_subgroups import GangSpec, read_gang_spec
from kai_ray.model import UNLIMITED, PriorityClass, Queue, QueueResource, fast_init
from kai_ray.quantity import parse_duration
from pod_grouper.pod_groups import RawPodGroup

_make_raw_group = fast_init(RawPodGroup)  # made once per PodGroup read: see kai_ray.model.records

MEMORY_UNIT = 1_000_000  # Queue memory is in 10^6 bytes


def _queue_resource(reader: ObjectReader, name: str, spec: Mapping[str, Any], warnings: list[str]) -> QueueResource:
    path = f"spec.resources.{name}"
    raw = spec.get(name)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise reader.fail(path, "must be a mapping", namespaced=False)
    values: dict[str, float] = {}
    for field in ("quota", "overQuotaWeight", "limit"):
        value = reader.number(f"{path}.{field}", 0.0, namespaced=False)
        if value < 0 and value != -1:
            raise reader.fail(f"{path}.{field}", f"must be -1 or at least 0, got {value:g}", namespaced=False)
        if field == "overQuotaWeight" and value < 0:
            value = 0.0
        values[field] = value
    if "limit" not in raw:
        # KAI reads an unset limit as 0: nothing of this resource may be allocated.
        warnings.append(f"Queue {reader.name}: {path}.limit is unset, which KAI reads as 0 (use -1 for no limit)")
    scale = MEMORY_UNIT if name == "memory" else 1
    quota, limit = values["quota"], values["limit"]
    return QueueResource(
        quota=quota * scale if quota != -1 else UNLIMITED,
        over_quota_weight=values["overQuotaWeight"],
        limit=limit * scale if limit != -1 else UNLIMITED,
    )


def parse_queue(reader: ObjectReader, warnings: list[str]) -> Queue:
    spec = reader.mapping("spec", namespaced=False)
    resources = spec.get("resources")
    if not isinstance(resources, Mapping):
        raise reader.fail("spec.resources", "missing (KAI requires it)", namespaced=False)
    min_runtimes: dict[str, float | None] = {}
    for field in ("preemptMinRuntime", "reclaimMinRuntime"):
        raw = spec.get(field)
        try:
            min_runtimes[field] = None if raw in (None, "") else parse_duration(raw)
        except ValueError:
            raise reader.fail(f"spec.{field}", f"bad duration {raw!r}", namespaced=False) from None
        if (min_runtimes[field] or 0.0) < 0:  # KAI's draft gives -1 a meaning kai-ray does not implement
            raise reader.fail(f"spec.{field}", f"negative durations are not supported, got {raw!r}", namespaced=False)
    return Queue(
        name=reader.name,
        parent=str(spec["parentQueue"]) if spec.get("parentQueue") else None,
        priority=reader.integer("spec.priority", L.DEFAULT_QUEUE_PRIORITY, namespaced=False),
        gpu=_queue_resource(reader, "gpu", resources, warnings),
        cpu=_queue_resource(reader, "cpu", resources, warnings),
        memory=_queue_resource(reader, "memory", resources, warnings),
        created=reader.timestamp("metadata.creationTimestamp", reader.meta.get("creationTimestamp"), False) or 0.0,
        preempt_min_runtime=min_runtimes["preemptMinRuntime"],
        reclaim_min_runtime=min_runtimes["reclaimMinRuntime"],
        display_name=str(spec.get("displayName") or ""),
    )


def parse_priority_class(reader: ObjectReader) -> PriorityClass:
    if reader.get("value") is None:
        raise reader.fail("value", "missing", namespaced=False)
    return PriorityClass(
        name=reader.name,
        value=reader.integer("value", 0, namespaced=False),
        global_default=bool(reader.get("globalDefault", False)),
    )


def _duration_field(reader: ObjectReader, path: str, raw: Any, negative_ok: bool = True) -> float | None:
    try:
        seconds = None if raw in (None, "") else parse_duration(raw)
    except ValueError:
        raise reader.fail(path, f"bad duration {raw!r}") from None
    if seconds is not None and seconds < 0 and not negative_ok:
        raise reader.fail(path, f"must not be negative, got {raw!r}")
    return seconds


def parse_pod_group(reader: ObjectReader, warnings: list[str] | None = None) -> RawPodGroup:
    common = _common_parts(reader)
    if common is None:
        spec = reader.mapping("spec")
        pg_labels = reader.string_map("metadata.labels")
        annotations = reader.string_map("metadata.annotations")
        gang = read_gang_spec(reader, [] if warnings is None else warnings)
    else:
        spec, pg_labels, annotations, gang = common
    preemptibility = _preemptibility(reader, spec, pg_labels, warnings)
    grace_raw = spec.get("stalenessGracePeriod") or annotations.get(L.STALENESS_GRACE_ANNOTATION)
    grace = _duration_field(reader, "spec.stalenessGracePeriod", grace_raw)
    delay_raw = spec.get("preemptionDelay") or annotations.get(L.PREEMPTION_DELAY_ANNOTATION)
    delay = _duration_field(reader, "spec.preemptionDelay", delay_raw, negative_ok=False)
    expected = _duration_field(
        reader,
        f"metadata.annotations.{L.EXPECTED_RUNTIME_ANNOTATION}",
        annotations.get(L.EXPECTED_RUNTIME_ANNOTATION),
        negative_ok=False,
    )
    reservation_after = _duration_field(
        reader,
        f"metadata.annotations.{L.RESERVATION_AFTER_ANNOTATION}",
        annotations.get(L.RESERVATION_AFTER_ANNOTATION),
    )
    return _make_raw_group(
        namespace=reader.namespace,
        name=reader.name,
        uid=str(reader.meta.get("uid") or ""),
        queue=str(spec["queue"]) if spec.get("queue") else pg_labels.get(L.QUEUE_LABEL) or None,
        priority_class_name=str(spec["priorityClassName"])
        if spec.get("priorityClassName")
        else pg_labels.get(L.PRIORITY_CLASS_LABEL) or None,
        preemptibility=preemptibility,
        min_member=gang.min_member,
        sub_groups=gang.sub_groups,
        created=reader.timestamp("metadata.creationTimestamp", reader.meta.get("creationTimestamp")) or 0.0,
        staleness_grace_seconds=grace,
        stale_since=reader.timestamp(
            f"metadata.annotations.{L.STALE_TIMESTAMP_ANNOTATION}", annotations.get(L.STALE_TIMESTAMP_ANNOTATION)
        ),
        last_start=reader.timestamp(
            f"metadata.annotations.{L.LAST_START_ANNOTATION}", annotations.get(L.LAST_START_ANNOTATION)
        ),
        min_sub_group=gang.min_sub_group,
        topology=gang.topology,
        last_eviction=reader.timestamp(
            f"metadata.annotations.{L.LAST_EVICTION_ANNOTATION}", annotations.get(L.LAST_EVICTION_ANNOTATION)
        ),
        preemption_delay_seconds=delay or None,
        expected_runtime_seconds=expected or None,
        reservation_after_seconds=reservation_after,
    )


def _preemptibility(
    reader: ObjectReader, spec: Mapping[str, Any], labels: Mapping[str, str], warnings: list[str] | None
) -> str | None:
    """``spec.preemptibility``, else the group's preemptibility label, else None (the priority
    decides). A bad spec value is an error, as the CRD's enum rejects it; a bad label is only
    warned about and ignored, as KAI ignores it, so the group is still scheduled."""
    value = spec.get("preemptibility")
    if value:
        if value not in L.PREEMPTIBILITIES:
            raise reader.fail("spec.preemptibility", f"must be one of {', '.join(L.PREEMPTIBILITIES)}, got {value!r}")
        return str(value)
    label = labels.get(L.PREEMPTIBILITY_LABEL)
    if label and label not in L.PREEMPTIBILITIES:
        if warnings is not None:
            warnings.append(
                f"{reader.ident(True)}: metadata.labels.{L.PREEMPTIBILITY_LABEL}: ignored {label!r} "
                f"(must be one of {', '.join(L.PREEMPTIBILITIES)})"
            )
        return None
    return label or None


# The largest minMember read as it is: larger ones go through a float, as every number does.
_EXACT_INTEGERS = 2**53


def _common_parts(reader: ObjectReader) -> tuple[Mapping[str, Any], dict[str, str], dict[str, str], GangSpec] | None:
    """Spec, labels, annotations and gang of a PodGroup of the shape nearly all have (mappings
    where mappings belong, a whole ``minMember`` or none, no sub-groups, ``minSubGroup`` or
    topology), read without walking a path per field. None for any other PodGroup: the caller
    reads it with every check, and says what is wrong."""
    spec = reader.doc.get("spec")
    labels, annotations = reader.meta.get("labels"), reader.meta.get("annotations")
    if not (type(spec) is dict and dict_or_absent(labels) and dict_or_absent(annotations)):
        return None
    min_member = spec.get("minMember")
    if min_member is None:
        min_member = 1
    elif type(min_member) is not int or not 0 <= min_member < _EXACT_INTEGERS:
        return None
    if (
        spec.get("minSubGroup") is not None
        or spec.get("topologyConstraint") is not None
        or spec.get("subGroups") not in (None, [])
    ):
        return None
    return spec, text_map(labels), text_map(annotations), GangSpec(min_member, None, (), None)
