"""What a PodGroup's status says where the adapter knows better than the cycle.

The coordinator only sees objects that could be read and pods it may place. When a PodGroup
itself is invalid, one of its pods is, or one of its pods is backed off after failed binds,
the cycle's reason ("the PodGroup has no pods yet", "waiting for the gang's pods") would be
false, or the group would get no condition at all; its condition says what is really wrong
instead, naming object, field and value (``StatusWriter.publish`` writes these notes in
place of the cycle's reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from k8s_adapter.binder import BindBackoff, BindFailures
from k8s_adapter.cache import ClusterCache
from k8s_adapter.problems import ObjectKey, Problem


@dataclass(frozen=True, slots=True)
class GroupNote:
    uid: str  # the PodGroup object's uid, to write on
    reason: str


def group_notes(
    problems: Mapping[ObjectKey, Problem],
    backed_off: Mapping[str, BindFailures],
    group_of: Callable[[str], str | None],
    uid_of: Callable[[str], str | None],
    now: float,
) -> dict[str, GroupNote]:
    """Per PodGroup key, why it really waits: ``group_of`` gives a pod's PodGroup key, ``uid_of``
    a PodGroup object's uid (None: there is no object to write on)."""
    texts: dict[str, list[str]] = {}
    uids: dict[str, str] = {}
    for (kind, key), problem in sorted(problems.items()):
        if not problem.skipped:
            continue  # used with a field ignored: the object's event says so, the group is fine
        if kind == "PodGroup" and problem.uid:
            texts.setdefault(key, []).append(f"the PodGroup is invalid: {problem.text}")
            uids[key] = problem.uid
        elif kind == "Pod" and problem.pod_group:
            texts.setdefault(problem.pod_group, []).append(f"{problem.text} (the pod is left out until it is fixed)")
    for pod, failures in sorted(backed_off.items()):
        group = group_of(pod)
        if group is None or failures.until <= now:
            continue
        wait = failures.until - now
        texts.setdefault(group, []).append(
            f"pod {pod} could not be bound {failures.count} time{'s' if failures.count > 1 else ''} "
            f"(last: {failures.reason}); it is placed again in {wait:.0f}s"
        )
    out: dict[str, GroupNote] = {}
    for group, found in texts.items():
        uid = uids.get(group) or uid_of(group)
        if uid:
            out[group] = GroupNote(uid, "; ".join(found))
    return out


def cache_notes(cache: ClusterCache, backoff: BindBackoff, now: float) -> dict[str, GroupNote]:
    """``group_notes`` for what the cache knows: its problems and the pods backed off after failed
    binds (one bound meanwhile, or gone, is forgotten first)."""
    backoff.forget(lambda pod: (seen := cache.pod_now(pod)) is not None and seen.node is None)

    def group_of(pod: str) -> str | None:
        record = cache.pods.get(pod)
        return f"{record.namespace}/{record.pod_group}" if record is not None and record.pod_group else None

    def uid_of(group: str) -> str | None:
        raw = cache.raw_groups.get(group)
        return raw.uid if raw is not None else None

    return group_notes(cache.problems_view, backoff.failures, group_of, uid_of, now)
