"""The Kubernetes Workload API's kinds (scheduling.k8s.io Workload and PodGroup) into records.

Read as Kubernetes 1.37 serves them (``v1beta1``, and ``v1alpha3`` of the same shape) and as 1.36
did (``v1alpha2``: the template reference is ``spec.podGroupTemplateRef.workload``). The 1.35
shape (``v1alpha1``: gangs inside the Workload, pods pointing at them with ``spec.workloadRef``) is
not read. Fields kai-ray does not honour are named in a warning each (docs/workload-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_ray import labels as L
from kai_ray.io.fields import ObjectReader, read_number
from pod_grouper.workload_api import API_GROUP, GangPodGroup, GangTemplate, WorkloadObject

# The versions read, newest first: the live adapter watches the first one its API server serves.
READ_VERSIONS = tuple(f"{API_GROUP}/{v}" for v in ("v1beta1", "v1alpha3", "v1alpha2"))


def parse_workload(reader: ObjectReader, warnings: list[str]) -> WorkloadObject:
    """A Workload: its labels (queue, preemptibility, priority class for its gangs) and its
    templates' gang policies and priority classes."""
    templates: dict[str, GangTemplate] = {}
    for index, raw in enumerate(reader.sequence("spec.podGroupTemplates")):
        path = f"spec.podGroupTemplates[{index}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise reader.fail(f"{path}.name", "missing")
        class_name = raw.get("priorityClassName")
        templates[raw["name"]] = GangTemplate(
            raw["name"], _min_count(reader, raw.get("schedulingPolicy"), f"{path}.schedulingPolicy"), class_name or None
        )
    if reader.get("spec.compositePodGroupTemplates"):
        warnings.append(
            f"{reader.ident()}: spec.compositePodGroupTemplates is not read: a CompositePodGroup's "
            "minGroupCount does not hold its PodGroups together (each is a gang of its own)"
        )
    labels = reader.string_map("metadata.labels")
    _check_preemptibility(reader, labels, warnings)
    return WorkloadObject(reader.namespace, reader.name, labels, templates)


def parse_gang_pod_group(reader: ObjectReader, api_version: str, warnings: list[str]) -> GangPodGroup:
    """A scheduling.k8s.io PodGroup: the gang its pods join."""
    spec = reader.mapping("spec")
    if api_version.endswith("/v1alpha2"):
        ref = reader.mapping("spec.podGroupTemplateRef.workload")
        workload, template = ref.get("workloadName"), ref.get("podGroupTemplateName")
    else:
        ref = reader.mapping("spec.workloadRef")
        workload, template = ref.get("workloadName"), ref.get("templateName")
    labels = reader.string_map("metadata.labels")
    _check_preemptibility(reader, labels, warnings)
    for note in _not_honoured(spec):
        warnings.append(f"{reader.ident()}: {note}")
    return GangPodGroup(
        namespace=reader.namespace,
        name=reader.name,
        uid=str(reader.meta.get("uid") or ""),
        api_version=api_version,
        created=reader.timestamp("metadata.creationTimestamp", reader.meta.get("creationTimestamp")) or 0.0,
        labels=labels,
        min_count=_min_count(reader, spec.get("schedulingPolicy"), "spec.schedulingPolicy"),
        priority_class_name=str(spec["priorityClassName"]) if spec.get("priorityClassName") else None,
        workload=str(workload) if workload else None,
        template=str(template) if template else None,
    )


def _min_count(reader: ObjectReader, policy: Any, path: str) -> int | None:
    """``gang.minCount`` (at least 1, as the API validates it), or None for ``basic``."""
    if not isinstance(policy, Mapping) or ("gang" in policy) == ("basic" in policy):
        raise reader.fail(path, "must set exactly one of gang and basic")
    if "basic" in policy:
        return None
    gang = policy["gang"]
    raw = gang.get("minCount") if isinstance(gang, Mapping) else None
    if raw is None:
        raise reader.fail(f"{path}.gang.minCount", "missing")
    count = read_number(raw, f"{reader.ident()}: {path}.gang.minCount")
    if not count.is_integer() or count < 1:
        raise reader.fail(f"{path}.gang.minCount", f"must be a whole number of at least 1, got {raw!r}")
    return int(count)


def _not_honoured(spec: Mapping[str, Any]) -> list[str]:
    """What the PodGroup asks for that kai-ray's scheduling does not do."""
    notes = []
    if (spec.get("schedulingConstraints") or {}).get("topology"):
        notes.append(
            "spec.schedulingConstraints.topology is not honoured (use KAI's kai.scheduler/topology "
            "annotations); the gang is placed without it"
        )
    if spec.get("resourceClaims"):
        notes.append("spec.resourceClaims (claims shared by the gang) are not allocated; each pod's own claims are")
    mode = spec.get("disruptionMode")
    if (isinstance(mode, Mapping) and "all" in mode) or mode == "PodGroup":
        notes.append("spec.disruptionMode all is not honoured: a victim search may evict single pods of the gang")
    if spec.get("preemptionPolicy") == "Never":
        notes.append("spec.preemptionPolicy Never is not honoured: the gang may preempt as its priority allows")
    if spec.get("parentCompositePodGroupName"):
        notes.append(
            "spec.parentCompositePodGroupName is not read: the CompositePodGroup's minGroupCount does not "
            "hold this gang together with its siblings"
        )
    if spec.get("priority") is not None and not spec.get("priorityClassName"):
        notes.append("spec.priority is not read without spec.priorityClassName; the default priority applies")
    return notes


def _check_preemptibility(reader: ObjectReader, labels: Mapping[str, str], warnings: list[str]) -> None:
    value = labels.get(L.PREEMPTIBILITY_LABEL)
    if value is not None and value not in L.PREEMPTIBILITIES:
        warnings.append(
            f"{reader.ident()}: metadata.labels.{L.PREEMPTIBILITY_LABEL}: ignored {value!r} "
            f"(must be one of {', '.join(L.PREEMPTIBILITIES)})"
        )


WORKLOAD_GROUP_FIELDS = ("workloadRef", "schedulingGroup")


def workload_gang(reader: ObjectReader, annotations: Mapping[str, str], lenient: list[str] | None) -> str | None:
    """The Workload API gang the pod joins: the PodGroup ``spec.schedulingGroup.podGroupName``
    names (KAI's design: the Workload API decides over ``pod-group-name``), or None. What is not
    read is said in ``lenient``: the 1.35 field, a malformed reference, an opt-out, an annotation
    the reference overrides."""
    where = f"Pod {reader.namespace}/{reader.name}"
    say = lenient.append if lenient is not None else (lambda _: None)
    if reader.get("spec.workloadRef") is not None:
        say(
            f"{where}: spec.workloadRef (the Workload API of Kubernetes 1.35, replaced by spec.schedulingGroup "
            "in 1.36) is not read: the pod is grouped as KAI's pod grouper groups it, without that group's gang policy"
        )
    group = reader.get("spec.schedulingGroup")
    if group is None:
        return None
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    if not isinstance(name, str) or not name:
        say(f"{where}: spec.schedulingGroup: names no podGroupName ({group!r}); the pod is grouped as if it had none")
        return None
    if annotations.get(L.IGNORE_WORKLOAD_API_ANNOTATION) == "true":
        say(
            f"{where}: spec.schedulingGroup.podGroupName {name!r} ignored "
            f"({L.IGNORE_WORKLOAD_API_ANNOTATION}: true); the pod is grouped as KAI's pod grouper groups it"
        )
        return None
    named = annotations.get(L.POD_GROUP_ANNOTATION)
    if named and named != name:
        say(
            f"{where}: metadata.annotations.{L.POD_GROUP_ANNOTATION} {named!r} ignored: the pod joins the "
            f"Workload API gang its spec.schedulingGroup names ({name!r})"
        )
    return name
