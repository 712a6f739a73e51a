"""PodGroups as a session uses them: a PodGroup as written (``RawPodGroup``, which the readers
fill) with its priority and preemptibility resolved, and implicit groups made.

Shared by the snapshot loader (all groups at once) and the Kubernetes adapter's cache (only the
groups a change touched), so that ``kai-ray schedule`` and ``kai-ray run`` resolve every group
the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from kai_ray import labels as L
from kai_ray.model import Pod, PodGroup, PriorityClass, SubGroup, TopologyConstraint, fast_init
from pod_grouper.grouping import ImplicitGroup

GangShape = Literal["tree", "none", "sets"]
_make_group = fast_init(PodGroup)  # one per PodGroup resolved: see kai_ray.model.records


@dataclass(frozen=True, slots=True)
class RawPodGroup:
    """A PodGroup as written, before its priority class and queue are resolved."""

    namespace: str
    name: str
    uid: str
    queue: str | None
    priority_class_name: str | None
    preemptibility: str | None
    min_member: int
    sub_groups: tuple[SubGroup, ...]
    created: float
    staleness_grace_seconds: float | None
    stale_since: float | None
    last_start: float | None
    min_sub_group: int | None = None
    topology: TopologyConstraint | None = None
    last_eviction: float | None = None
    preemption_delay_seconds: float | None = None
    expected_runtime_seconds: float | None = None
    reservation_after_seconds: float | None = None
    workload_api: str = ""  # a Workload API gang: what declared it (kai_ray.model.PodGroup.workload_api)


def priority_of(name: str | None, classes: Mapping[str, PriorityClass], where: str, warnings: list[str]) -> int:
    """The value of PriorityClass ``name``; the global default (or KAI's) when unset or missing."""
    if name and name in classes:
        return classes[name].value
    if name:
        warnings.append(f"{where}: PriorityClass {name!r} does not exist, using the default priority")
    default = next((c.value for c in classes.values() if c.global_default), None)
    return default if default is not None else L.DEFAULT_JOB_PRIORITY


def resolve_pod_group(
    raw: RawPodGroup,
    members: Iterable[Pod],
    classes: Mapping[str, PriorityClass],
    warnings: list[str],
    missing: list[str] | None = None,
) -> PodGroup:
    """A PodGroup object as the session sees it; without ``spec.queue`` its pods' queue label
    decides (the first member, by name, that has one). A PriorityClass that does not exist is
    noted in ``missing`` if given (KAI falls back without a word), else among ``warnings``."""
    queue = raw.queue
    if not queue:
        labelled = sorted((p.name, p.queue_label) for p in members if p.queue_label)
        queue = labelled[0][1] if labelled else None
    key = f"{raw.namespace}/{raw.name}"
    priority = priority_of(
        raw.priority_class_name, classes, f"PodGroup {key}", warnings if missing is None else missing
    )
    shape = _gang_shape(raw.min_member, raw.sub_groups, raw.min_sub_group)
    preemptible, semi = _preemptibility(raw.preemptibility, priority, shape, f"PodGroup {key}", warnings)
    return _make_group(
        namespace=raw.namespace,
        name=raw.name,
        uid=raw.uid,
        queue=queue or L.DEFAULT_QUEUE,
        priority=priority,
        preemptible=preemptible,
        min_member=raw.min_member,
        sub_groups=raw.sub_groups,
        priority_class_name=raw.priority_class_name,
        created=raw.created,
        staleness_grace_seconds=raw.staleness_grace_seconds,
        stale_since=raw.stale_since,
        last_start=raw.last_start,
        last_eviction=raw.last_eviction,
        preemption_delay_seconds=raw.preemption_delay_seconds,
        expected_runtime_seconds=raw.expected_runtime_seconds,
        reservation_after_seconds=raw.reservation_after_seconds,
        min_sub_group=raw.min_sub_group,
        topology=raw.topology,
        semi_preemptible=semi,
        workload_api=raw.workload_api,
    )


def implicit_pod_group(
    members: Iterable[Pod],
    spec_of: Callable[[Pod], ImplicitGroup],
    classes: Mapping[str, PriorityClass],
    warnings: list[str],
    missing: list[str] | None = None,
) -> PodGroup:
    """The PodGroup KAI's pod grouper would create for pods that name none (``spec_of`` gives a
    pod's grouping, ``pod_grouper.grouping.implicit_group`` with what the caller knows of its owners).
    It exists from its first pod on, so it is as old as the oldest member, and that member's
    labels decide (ties by name), whatever order the pods were read in."""
    first = min(members, key=lambda p: (p.created, p.name))
    spec = spec_of(first)
    where = f"Pod {first.key}"
    priority = priority_of(spec.priority_class_name, classes, where, warnings if missing is None else missing)
    label = spec.preemptibility
    if label is not None and label not in L.PREEMPTIBILITIES:
        # KAI's pod grouper logs an invalid label and ignores it: a warning, not an input error.
        warnings.append(
            f"{where}: metadata.labels.{L.PREEMPTIBILITY_LABEL}: ignored {label!r} "
            f"(must be one of {', '.join(L.PREEMPTIBILITIES)})"
        )
        label = None
    shape = _gang_shape(spec.min_member, spec.sub_groups, spec.min_sub_group)
    preemptible, semi = _preemptibility(label, priority, shape, f"PodGroup {first.namespace}/{spec.name}", warnings)
    return PodGroup(
        namespace=first.namespace,
        name=spec.name,
        queue=spec.queue,
        priority=priority,
        preemptible=preemptible,
        min_member=spec.min_member,
        priority_class_name=spec.priority_class_name,
        created=first.created,
        sub_groups=spec.sub_groups,
        min_sub_group=spec.min_sub_group,
        topology=spec.topology,
        semi_preemptible=semi,
    )


def _preemptibility(
    value: str | None, priority: int, shape: GangShape, where: str, warnings: list[str]
) -> tuple[bool, bool]:
    """Preemptible, semi-preemptible: a valid value decides, else the priority (below 100 is
    preemptible). A semi-preemptible gang of shape ``none`` protects nothing, so it is
    preemptible, as KAI's design says of minMember 0. One of shape ``tree`` runs as
    non-preemptible: which whole sub-groups are its protected core is not settled in KAI (its
    design leaves automated segments out for the same reason), and keeping all of it is the side
    that never evicts what a user meant to protect."""
    if value is None:
        return priority < L.PREEMPTIBLE_BELOW, False
    if value != L.SEMI_PREEMPTIBLE:
        return value == L.PREEMPTIBLE, False
    if shape == "none":
        return True, False
    if shape == "tree":
        warnings.append(
            f"{where}: semi-preemptible with minSubGroup or nested sub-groups is not supported; "
            "it runs as non-preemptible"
        )
        return False, False
    return False, True


def _gang_shape(min_member: int, sub_groups: tuple[SubGroup, ...], min_sub_group: int | None) -> GangShape:
    """What the gang is: a ``tree`` of sub-groups (a minSubGroup, nested sub-groups, or a
    minMember above what the sub-groups need), ``none`` (a minimum of no pods) or ``sets`` (pod
    sets side by side, each with its own minimum)."""
    if min_sub_group is not None or any(s.parent for s in sub_groups):
        return "tree"
    if sub_groups:
        return "tree" if min_member > sum(s.min_member for s in sub_groups) else "sets"
    return "none" if min_member <= 0 else "sets"
