"""What a PodGroup's status says: the cycle's reason, or what the adapter knows better.

The coordinator only sees objects that could be read and pods it may place. When a PodGroup
itself is invalid, one of its pods is, or one of its pods is backed off after failed binds,
the cycle's reason ("the PodGroup has no pods yet", "waiting for the gang's pods") would be
false; the group's condition says what is really wrong instead, naming object, field and value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from k8s_adapter.binder import BindFailures
from k8s_adapter.problems import ObjectKey, Problem

GroupStatus = tuple[str, str]  # (status, reason)


def group_statuses(
    decided: Mapping[str, GroupStatus],
    problems: Mapping[ObjectKey, Problem],
    backed_off: Mapping[str, BindFailures],
    group_of: Callable[[str], str | None],
    now: float,
) -> dict[str, GroupStatus]:
    """``decided`` (from the cycle), where the adapter knows better: its findings replace the
    cycle's reason, which was worked out without the objects it could not use."""
    notes: dict[str, list[str]] = {}
    for (kind, key), problem in sorted(problems.items()):
        if not problem.skipped:
            continue  # used with a field ignored: the object's event says so, the group is fine
        if kind == "PodGroup":
            notes.setdefault(key, []).append(f"the PodGroup is invalid: {problem.text}")
        elif kind == "Pod" and problem.pod_group:
            notes.setdefault(problem.pod_group, []).append(f"{problem.text} (the pod is left out until it is fixed)")
    for pod, failures in sorted(backed_off.items()):
        group = group_of(pod)
        if group is None or failures.until <= now:
            continue
        wait = failures.until - now
        notes.setdefault(group, []).append(
            f"pod {pod} could not be bound {failures.count} time{'s' if failures.count > 1 else ''} "
            f"(last: {failures.reason}); it is placed again in {wait:.0f}s"
        )
    out = dict(decided)
    for group, texts in notes.items():
        out[group] = ("Pending", "; ".join(texts))
    return out
