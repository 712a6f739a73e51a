"""Server-side printing (meta.k8s.io Table), so `kubectl get` shows useful columns."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Column = tuple[str, Callable[[Obj], Any]]


def _age(obj: Obj) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return ""
    seconds = int((datetime.now(UTC) - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _pod_status(pod: Obj) -> str:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ready(obj: Obj) -> str:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return "Ready" if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) else "NotReady"


def _gpus(obj: Obj) -> Any:
    return ((obj.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", "0")


def _queue_gpu(obj: Obj, field: str) -> Any:
    return (((obj.get("spec") or {}).get("resources") or {}).get("gpu") or {}).get(field, "")


def _scheduled(pg: Obj) -> str:
    conditions = (pg.get("status") or {}).get("schedulingConditions") or []
    return "Unschedulable" if conditions else ""


COLUMNS: dict[str, list[Column]] = {
    "Pod": [("Status", _pod_status), ("Node", lambda o: (o.get("spec") or {}).get("nodeName") or "<none>"),
            ("Queue", lambda o: ((o.get("metadata") or {}).get("labels") or {}).get("kai.scheduler/queue", "")),
            ("Age", _age)],
    "Node": [("Status", _ready), ("GPUs", _gpus), ("Age", _age)],
    "Queue": [("Parent", lambda o: (o.get("spec") or {}).get("parentQueue", "")),
              ("GPU quota", lambda o: _queue_gpu(o, "quota")), ("GPU limit", lambda o: _queue_gpu(o, "limit")),
              ("Age", _age)],
    "PodGroup": [("Queue", lambda o: (o.get("spec") or {}).get("queue", "")),
                 ("Min", lambda o: (o.get("spec") or {}).get("minMember", "")), ("Scheduling", _scheduled),
                 ("Age", _age)],
}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def table(kind: str, items: list[Obj], version: str) -> Obj:
    columns: list[Column] = [("Name", lambda o: (o.get("metadata") or {}).get("name", ""))]
    columns += COLUMNS.get(kind, [("Age", _age)])
    definitions = [{"name": name, "type": "string", "format": "name" if name == "Name" else "", "description": "",
                    "priority": 0} for name, _ in columns]
    rows = [{"cells": [str(get(o)) for _, get in columns],
             "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata") or {}}} for o in items]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": version},
            "columnDefinitions": definitions, "rows": rows}
