"""Malformed live objects, said where users look: one Warning event per object and problem.

The cache records a ``Problem`` for every object it could not read in full: left out of
scheduling (``skipped``), or used with the unreadable field ignored (a pod that holds its
node is always counted). Each message names the object, the field and the value. The
reporter posts an Event on the object when a problem appears or its text changes, never
again while it stays the same, and forgets it when the object is fixed or gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from k8s_adapter.api import JSON, KubeApi, KubeError
from k8s_adapter.kinds import EVENTS
from kai_ray.labels import POD_GROUP_ANNOTATION

log = logging.getLogger(__name__)
ObjectKey = tuple[str, str]  # (kind, "namespace/name" or "name")
MAX_MESSAGE = 1000


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


class ProblemReporter:
    def __init__(self, api: KubeApi, reporter: str = "kai-ray", concurrency: int = 8) -> None:
        self.api = api
        self.reporter = reporter
        self.limit = asyncio.Semaphore(concurrency)
        self.reported: dict[ObjectKey, tuple[str, str]] = {}  # object -> (uid, text) already posted
        self.events = 0

    async def publish(self, problems: Mapping[ObjectKey, Problem]) -> None:
        for key in [k for k in self.reported if k not in problems]:
            del self.reported[key]  # fixed or gone: a new problem later is news again
        due = [(k, p) for k, p in problems.items() if self.reported.get(k) != (p.uid, p.text)]
        if due:
            await asyncio.gather(*(self._post(key, problem) for key, problem in due))

    async def _post(self, key: ObjectKey, problem: Problem) -> None:
        namespace = problem.namespace or "default"
        suffix = " (left out of scheduling until it is fixed)" if problem.skipped else ""
        involved = {"apiVersion": problem.api_version, "kind": problem.kind, "name": problem.name}
        if problem.namespace:
            involved["namespace"] = problem.namespace
        if problem.uid:
            involved["uid"] = problem.uid
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{problem.name}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": "InvalidObject" if problem.skipped else "ObjectWarning",
            "message": f"{problem.text}{suffix}"[:MAX_MESSAGE],
            "type": "Warning",
            "source": {"component": self.reporter},
            "reportingComponent": self.reporter,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        async with self.limit:
            try:
                await self.api.request("POST", EVENTS.collection(namespace), body=event)
            except KubeError as exc:
                log.info("event for %s %s not written: %s", problem.kind, key[1], exc)
                return
        self.reported[key] = (problem.uid, problem.text)
        self.events += 1
