"""Server-side printing: ``meta.k8s.io/v1 Table`` answers for kubectl's ``get``.

kubectl asks for Tables (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) and prints
the columns it gets back, so what ``kubectl get pods`` shows is decided here. Built-in kinds get
the columns the real server prints for them (trimmed where the dev cluster has no data);
custom resources get their CRD's additionalPrinterColumns, or Age when they declare none.
Ages are computed against the cluster clock, the same one that stamps creationTimestamp.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from devcluster.catalog import ResourceType
from devcluster.clock import Clock, parse_timestamp

Obj = dict[str, Any]
Cells = Callable[[Obj, Clock], list[Any]]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def human_age(seconds: float) -> str:
    """A duration as kubectl shows ages: precise when short, coarser as it grows."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if h < 192:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if d < 730:
        return f"{d}d"
    return f"{d // 365}y{d % 365}d" if d // 365 < 8 else f"{d // 365}y"


def age(timestamp: Any, clock: Clock) -> str:
    when = parse_timestamp(str(timestamp)) if timestamp else None
    if when is None:
        return "<unknown>"
    return human_age((clock.wall() - when).total_seconds())


def _col(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


NAME = _col("Name", fmt="name")
AGE = _col("Age")


def _pod_cells(pod: Obj, clock: Clock) -> list[Any]:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    reason = status.get("reason") or status.get("phase") or "Pending"
    for container in statuses:
        state = container.get("state") or {}
        reason = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason") or reason
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    total = len(spec.get("containers") or [])
    return [
        meta["name"],
        f"{ready}/{total}",
        reason,
        str(restarts),
        age(meta.get("creationTimestamp"), clock),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _node_cells(node: Obj, clock: Clock) -> list[Any]:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in meta.get("labels") or {} if k.startswith("node-role.kubernetes.io/"))
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        meta["name"],
        state,
        ",".join(roles) or "<none>",
        age(meta.get("creationTimestamp"), clock),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _event_cells(event: Obj, clock: Clock) -> list[Any]:
    involved = event.get("involvedObject") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    return [
        age(last, clock),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


def _pdb_cells(pdb: Obj, clock: Clock) -> list[Any]:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    return [
        pdb["metadata"]["name"],
        str(spec.get("minAvailable", "N/A")),
        str(spec.get("maxUnavailable", "N/A")),
        int(status.get("disruptionsAllowed", 0)),
        age(pdb["metadata"].get("creationTimestamp"), clock),
    ]


BUILT_IN: dict[tuple[str, str], tuple[list[Obj], Cells]] = {
    ("", "pods"): (
        [
            NAME,
            _col("Ready"),
            _col("Status"),
            _col("Restarts"),
            AGE,
            _col("IP", priority=1),
            _col("Node", priority=1),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1),
        ],
        _pod_cells,
    ),
    ("", "nodes"): (
        [
            NAME,
            _col("Status"),
            _col("Roles"),
            AGE,
            _col("Version"),
            _col("Internal-IP", priority=1),
            _col("External-IP", priority=1),
            _col("OS-Image", priority=1),
            _col("Kernel-Version", priority=1),
            _col("Container-Runtime", priority=1),
        ],
        _node_cells,
    ),
    ("", "namespaces"): (
        [NAME, _col("Status"), AGE],
        lambda o, c: [
            o["metadata"]["name"],
            (o.get("status") or {}).get("phase", ""),
            age(o["metadata"].get("creationTimestamp"), c),
        ],
    ),
    ("", "events"): ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")], _event_cells),
    ("", "configmaps"): (
        [NAME, _col("Data", "integer"), AGE],
        lambda o, c: [
            o["metadata"]["name"],
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            age(o["metadata"].get("creationTimestamp"), c),
        ],
    ),
    ("coordination.k8s.io", "leases"): (
        [NAME, _col("Holder"), AGE],
        lambda o, c: [
            o["metadata"]["name"],
            (o.get("spec") or {}).get("holderIdentity", ""),
            age(o["metadata"].get("creationTimestamp"), c),
        ],
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        [NAME, _col("Value", "integer"), _col("Global-Default", "boolean"), AGE, _col("PreemptionPolicy")],
        lambda o, c: [
            o["metadata"]["name"],
            o.get("value", 0),
            bool(o.get("globalDefault", False)),
            age(o["metadata"].get("creationTimestamp"), c),
            o.get("preemptionPolicy", ""),
        ],
    ),
    ("policy", "poddisruptionbudgets"): (
        [NAME, _col("Min Available"), _col("Max Unavailable"), _col("Allowed Disruptions", "integer"), AGE],
        _pdb_cells,
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        [NAME, _col("Created At", "date")],
        lambda o, c: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")],
    ),
}


def _path_parts(path: str) -> list[str]:
    """``.a.b[0]['c.d']`` -> ["a", "b", "0", "c.d"]: the JSONPath subset printer columns use."""
    found = re.findall(r"\['([^']*)'\]|\[(\*|\d+)\]|\.?([^.\[\]]+)", path.strip().strip("{}"))
    return [quoted or index or plain for quoted, index, plain in found]


def json_path(obj: Any, path: str) -> Any:
    values = [obj]
    for part in _path_parts(path):
        found = []
        for value in values:
            if isinstance(value, dict) and part in value:
                found.append(value[part])
            elif isinstance(value, list) and part == "*":
                found.extend(value)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                found.append(value[int(part)])
        values = found
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _go_text(value: Any) -> str:
    """Values the way Go's %v prints decoded JSON: lists as [a b], maps as map[k:v]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + " ".join(_go_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_text(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)


def _custom(rt: ResourceType) -> tuple[list[Obj], Cells]:
    columns = rt.printer_columns or ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},)
    defs = [NAME] + [
        _col(str(c.get("name")), str(c.get("type", "string")), int(c.get("priority", 0)), str(c.get("format", "")))
        for c in columns
    ]

    def cells(obj: Obj, clock: Clock) -> list[Any]:
        row: list[Any] = [obj["metadata"]["name"]]
        for column in columns:
            value = json_path(obj, str(column.get("jsonPath", "")))
            kind = column.get("type", "string")
            if value is None:
                row.append(None)
            elif kind == "date":
                row.append(age(value, clock))
            elif kind in ("integer", "number", "boolean") and not isinstance(value, (list, dict)):
                row.append(value)
            else:
                row.append(_go_text(value))
        return row

    return defs, cells


def columns_for(rt: ResourceType) -> tuple[list[Obj], Cells]:
    if rt.custom:
        return _custom(rt)
    return BUILT_IN.get(rt.storage_key) or (
        [NAME, AGE],
        lambda o, c: [o["metadata"]["name"], age(o["metadata"].get("creationTimestamp"), c)],
    )


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(
    rt: ResourceType,
    objects: Iterable[Obj],
    clock: Clock,
    include: str = "Metadata",
    list_meta: Obj | None = None,
    headers: bool = True,
) -> Obj:
    defs, cells = columns_for(rt)
    rows = []
    for obj in objects:
        row: Obj = {"cells": cells(obj, clock)[: len(defs)]}
        partial = _row_object(obj, include)
        if partial is not None:
            row["object"] = partial
        rows.append(row)
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {}, "rows": rows}
    out["columnDefinitions"] = defs if headers else []
    return out
