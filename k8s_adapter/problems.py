"""Malformed live objects, said where users look: one Warning event per object and problem.

The cache records a ``Problem`` for every object it could not read in full: left out of
scheduling (``skipped``), or used with the unreadable field ignored (a pod that holds its
node is always counted). Each message names the object, the field and the value. The status
writer posts them as Warning events on the objects (``problem_events``), aggregated as its
other events are: one Event per problem, a new one when its text changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from k8s_adapter.api import JSON
from k8s_adapter.events import ObjectRef
from kai_ray.labels import POD_GROUP_ANNOTATION

ObjectKey = tuple[str, str]  # (kind, "namespace/name" or "name")


@dataclass(frozen=True, slots=True)
class Problem:
    kind: str
    api_version: str
    namespace: str | None
    name: str
    uid: str
    messages: tuple[str, ...]
    skipped: bool  # left out of scheduling (else: used, the field ignored)
    pod_group: str | None = None  # for a pod: the PodGroup it names, whose status should say why it waits

    @property
    def text(self) -> str:
        return "; ".join(self.messages)

    @staticmethod
    def of(kind: str, api_version: str, obj: JSON, messages: list[str], skipped: bool) -> Problem:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        annotations = meta.get("annotations")
        group = annotations.get(POD_GROUP_ANNOTATION) if kind == "Pod" and isinstance(annotations, dict) else None
        return Problem(
            kind,
            api_version,
            str(namespace) if namespace else None,
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            tuple(messages),
            skipped,
            f"{namespace or 'default'}/{group}" if isinstance(group, str) and group else None,
        )


def problem_events(problems: Mapping[ObjectKey, Problem]) -> list[tuple[ObjectRef, str, str]]:
    """One Warning event per malformed object: (the object, reason, message). The status writer
    aggregates them as every other event, so an unchanged problem is one Event however long it
    stays, and a changed one is news."""
    out = []
    for problem in problems.values():
        ref = ObjectRef(problem.kind, problem.api_version, problem.namespace or "", problem.name, problem.uid)
        suffix = " (left out of scheduling until it is fixed)" if problem.skipped else ""
        reason = "InvalidObject" if problem.skipped else "ObjectWarning"
        out.append((ref, reason, f"{problem.text}{suffix}"))
    return out
