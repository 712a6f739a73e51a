"""KAI's table-test situations (``scenarios.json``) as the inputs ``kai-ray`` reads.

An action scenario becomes what a user would hand to ``kai-ray schedule``: a multi-document
snapshot (PriorityClasses, Queues parents first, Nodes, PodGroups, Pods) and a scheduler config
that runs only the scenario's action. A fair-share scenario becomes a ``kai-ray fairshare``
input. Both follow docs/architecture.md#snapshot-input and #fair-share-input; the scenario
fields are described in the file's own ``schema_notes``.

The corpus spells out every default KAI's test helpers applied, so nothing here adds one of
its own, except the per-device GPU memory label that KAI's test nodes carry
(``kai_defaults.node``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

Doc = dict[str, Any]

SCENARIOS = Path(__file__).with_name("scenarios.json")
NOW = datetime(2025, 1, 1, tzinfo=UTC)  # the session clock; pod group ages count back from it
QUEUES_CREATED = datetime(2024, 1, 1, tzinfo=UTC)  # creation_order n is this plus n seconds
NAMESPACE = "default"
SCHEDULER = "kai-scheduler"
QUEUE_MEMORY_UNIT = 10**6  # Queue objects give memory in 10^6 bytes; the corpus in bytes
RESOURCES = ("gpu", "cpu", "memory")
STATUSES = frozenset({"Pending", "Binding", "Pipelined", "Running", "Releasing", "Failed", "Succeeded"})
_NOT_DNS = re.compile(r"[^a-z0-9.-]")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


@cache
def corpus() -> Doc:
    data: Doc = json.loads(SCENARIOS.read_text(encoding="utf-8"))
    return data


def scenarios() -> list[Doc]:
    return list(corpus()["scenarios"])


def own_cases(file_name: str) -> list[Doc]:
    """kai-ray's own cases in this format (a file next to ``scenarios.json``)."""
    cases: list[Doc] = json.loads(SCENARIOS.with_name(file_name).read_text(encoding="utf-8"))["scenarios"]
    return cases


def timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def number(value: float) -> int | float:
    """Whole numbers printed without a fraction, as a manifest would have them."""
    return int(value) if float(value).is_integer() else value


def kubernetes_names(names: list[str]) -> dict[str, str]:
    """Each name as a valid DNS-1123 object name: kept when it is one already, else lower-cased
    with invalid characters as '-'; a clash with a name already taken gets -2, -3, ..."""
    taken = {n for n in names if _DNS_NAME.fullmatch(n)}
    out: dict[str, str] = {}
    for name in names:
        if name in taken:
            out[name] = name
            continue
        base = _NOT_DNS.sub("-", name.lower()).strip("-.") or "x"
        candidate, suffix = base, 2
        while candidate in taken:
            candidate, suffix = f"{base}-{suffix}", suffix + 1
        taken.add(candidate)
        out[name] = candidate
    return out


def priority_class(value: int) -> str:
    return f"prio-{value}" if value >= 0 else f"prio-neg-{-value}"


@dataclass(frozen=True)
class ActionInput:
    """One action scenario as kai-ray's inputs, and the pod keys its decisions are keyed by."""

    documents: list[Doc]
    config: Doc
    pod_keys: dict[str, str]  # task name -> "<namespace>/<pod>"


def action_input(scenario: Doc) -> ActionInput:
    queue_names = kubernetes_names([q["name"] for q in scenario["queues"]])
    job_names = kubernetes_names([j["name"] for j in scenario["jobs"]])
    pod_names = kubernetes_names([t["name"] for j in scenario["jobs"] for t in j["tasks"]])
    grace = (scenario.get("session") or {}).get("staleness_grace_period_seconds")
    gpu_memory = corpus()["kai_defaults"]["node"]["gpu_memory_per_device_label"]

    documents: list[Doc] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class(value)},
            "value": value,
        }
        for value in sorted({j["priority"] for j in scenario["jobs"]})
    ]
    documents += [_queue(q, queue_names) for q in _parents_first(scenario["queues"])]
    documents += [_node(n, gpu_memory) for n in scenario["nodes"]]
    for job in scenario["jobs"]:
        documents.append(_pod_group(job, job_names[job["name"]], queue_names[job["queue"]], grace))
        for task in job["tasks"]:
            documents.append(_pod(task, job, pod_names[task["name"]], job_names[job["name"]], queue_names))
    return ActionInput(documents, _config(scenario, grace), {t: f"{NAMESPACE}/{p}" for t, p in pod_names.items()})


def _parents_first(queues: list[Doc]) -> list[Doc]:
    by_name = {q["name"]: q for q in queues}

    def depth(queue: Doc) -> int:
        steps = 0
        while queue["parent"] is not None:
            queue = by_name[queue["parent"]]
            steps += 1
            assert steps <= len(by_name), f"queue cycle through {queue['name']}"
        return steps

    return sorted(queues, key=depth)


def _queue(queue: Doc, names: dict[str, str]) -> Doc:
    def amount(value: float, resource: str) -> int | float:
        return number(value if value == -1 or resource != "memory" else value / QUEUE_MEMORY_UNIT)

    spec: Doc = {}
    if queue["parent"] is not None:
        spec["parentQueue"] = names[queue["parent"]]
    spec["priority"] = queue["priority"]
    spec["resources"] = {
        r: {
            "quota": amount(queue[r]["quota"], r),
            "overQuotaWeight": number(queue[r]["over_quota_weight"]),
            "limit": amount(queue[r]["limit"], r),
        }
        for r in RESOURCES
    }
    created = QUEUES_CREATED + timedelta(seconds=queue["creation_order"])
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": names[queue["name"]], "creationTimestamp": timestamp(created)},
        "spec": spec,
    }


def _node(node: Doc, gpu_memory_mib: int) -> Doc:
    labels = dict(node["labels"])
    if node["gpu"] > 0:
        labels.setdefault("nvidia.com/gpu.memory", str(gpu_memory_mib))
    amounts = {
        "cpu": f"{number(node['cpu_millis'])}m",
        "memory": str(number(node["memory_bytes"])),
        "nvidia.com/gpu": str(number(node["gpu"])),
        "pods": str(node["max_pods"]),
    }
    # MIG cases (mig.json): the instances the node offers by profile, and the device plugin's strategy.
    amounts.update({profile: str(count) for profile, count in (node.get("mig") or {}).items()})
    if node.get("mig_strategy"):
        labels.update({"nvidia.com/mig.strategy": node["mig_strategy"], "node-role.kubernetes.io/mig-enabled": "true"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node["name"], "labels": labels},
        "status": {
            "allocatable": amounts,
            "capacity": dict(amounts),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _created(job: Doc) -> str:
    return timestamp(NOW - timedelta(minutes=job["age_minutes"]))


def _pod_group(job: Doc, name: str, queue: str, grace: float | None) -> Doc:
    metadata: Doc = {"name": name, "namespace": NAMESPACE, "creationTimestamp": _created(job)}
    if job.get("stale_for_seconds") is not None:
        since = NOW - timedelta(seconds=job["stale_for_seconds"])
        metadata["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": timestamp(since)}
    metadata.setdefault("annotations", {}).update(_timing_annotations(job))
    if not metadata["annotations"]:
        del metadata["annotations"]
    spec: Doc = {
        "minMember": job["min_available"],
        "queue": queue,
        "priorityClassName": priority_class(job["priority"]),
        "preemptibility": job.get("preemptibility") or ("preemptible" if job["preemptible"] else "non-preemptible"),
    }
    if job.get("subgroups"):
        spec["subGroups"] = [{"name": s["name"], "minMember": s["min_available"]} for s in job["subgroups"]]
    if grace is not None:
        spec["stalenessGracePeriod"] = f"{number(grace)}s"
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": metadata, "spec": spec}


def _timing_annotations(job: Doc) -> dict[str, str]:
    """kai-ray's cases only: a job's expected runtime, its last start and its reservation threshold."""
    out = {}
    if job.get("expected_runtime_minutes") is not None:
        out["kai.scheduler/expected-runtime"] = f"{number(job['expected_runtime_minutes'])}m"
    if job.get("started_minutes_ago") is not None:
        out["kai.scheduler/last-start-timestamp"] = timestamp(NOW - timedelta(minutes=job["started_minutes_ago"]))
    if job.get("reservation_after") is not None:
        out["kai-ray.io/reservation-after"] = str(job["reservation_after"])
    return out


def _pod(task: Doc, job: Doc, name: str, group: str, queues: dict[str, str]) -> Doc:
    labels = {"kai.scheduler/queue": queues[job["queue"]]}
    annotations = {"pod-group-name": group}
    if task.get("subgroup"):
        labels["kai.scheduler/subgroup-name"] = task["subgroup"]
    if task.get("task_order_priority") is not None:
        labels["kai.scheduler/task-priority"] = str(task["task_order_priority"])
    gpu_groups = [str(g) for g in task.get("gpu_groups") or ()]
    if gpu_groups:  # the shared GPU a placed fraction sits on; several when it spans devices
        labels["runai-gpu-group"] = gpu_groups[0]
        if len(gpu_groups) > 1:
            labels.update({f"runai-gpu-group/{g}": g for g in gpu_groups})

    resources: Doc = {}
    if not job.get("best_effort"):  # best-effort pods request nothing at all
        requests = {"cpu": f"{number(task['cpu_millis'])}m", "memory": str(number(task["memory_bytes"]))}
        if task["gpu"] > 0:
            requests["nvidia.com/gpu"] = str(number(task["gpu"]))
            resources["limits"] = {"nvidia.com/gpu": requests["nvidia.com/gpu"]}
        for profile, count in (task.get("mig") or {}).items():  # extended resources: limits equal requests
            requests[profile] = str(count)
            resources.setdefault("limits", {})[profile] = str(count)
        resources["requests"] = requests
        for profile, count in (task.get("legacy_mig") or {}).items():  # MIG asked for the old way
            annotations[profile] = str(count)
        if task.get("gpu_fraction"):
            annotations["gpu-fraction"] = str(task["gpu_fraction"])

    state, node = task["state"], task.get("node")
    spec: Doc = {"schedulerName": SCHEDULER}
    if state in ("Running", "Releasing", "Failed"):
        spec["nodeName"] = node  # a Pipelined pod is only nominated; a Pending one has none
    if task.get("node_affinity"):
        term = {
            "matchExpressions": [
                {"key": k, "operator": "In", "values": list(v)} for k, v in task["node_affinity"].items()
            ]
        }
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    spec["containers"] = [{"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": resources}]

    metadata: Doc = {
        "name": name,
        "namespace": NAMESPACE,
        "creationTimestamp": _created(job),
        "labels": labels,
        "annotations": annotations,
    }
    status: Doc = {"phase": {"Releasing": "Running", "Pipelined": "Pending"}.get(state, state)}
    if state == "Releasing":  # terminating: its resources are releasing, not idle
        metadata["deletionTimestamp"] = timestamp(NOW)
    if state == "Pipelined":
        status["nominatedNodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _config(scenario: Doc, grace: float | None) -> Doc:
    """Only the scenario's action; placement from KAI's plugin list (the scenario's, else the default)."""
    defaults = corpus()["kai_defaults"]
    plugins = (scenario.get("scheduler_config") or {}).get("plugins") or defaults["default_plugins"]
    placement = {"gpu": "binpack", "cpu": "binpack", "gpuDevice": "pack"}
    for plugin in plugins:
        if plugin["name"] == "nodeplacement":
            arguments = plugin.get("arguments") or {}
            placement["gpu"] = arguments.get("gpu", "binpack")
            placement["cpu"] = arguments.get("cpu", "binpack")
        elif plugin["name"] in ("gpupack", "gpuspread"):
            placement["gpuDevice"] = plugin["name"].removeprefix("gpu")
    config: Doc = {
        "schedulerName": SCHEDULER,
        "actions": [scenario["action"]],
        "placementStrategy": placement,
        "kValue": defaults["session"]["fair_share_k_value"],
    }
    if grace is not None:
        config["defaultStalenessGracePeriod"] = f"{number(grace)}s"
    reservation = (scenario.get("scheduler_config") or {}).get("reservation")
    if reservation is not None:  # kai-ray's cases only
        config["reservation"] = reservation
    return config


def fairshare_input(scenario: Doc) -> Doc:
    """The ``kai-ray fairshare`` input; amounts unchanged (memory in bytes, cpu in millicores)."""
    problem = scenario["fairshare_input"]
    fields = {"quota": "quota", "overQuotaWeight": "over_quota_weight", "limit": "limit"}
    fields |= {"request": "request", "allocated": "allocated"}
    return {
        "total": {r: problem["total"].get(r, 0) for r in RESOURCES},
        "kValue": problem.get("k_value", 0),
        "queues": [
            {
                "name": q["name"],
                "parent": q["parent"],
                "priority": q["priority"],
                "creationOrder": q["creation_order"],
                "resources": {
                    r: {**{key: q[r][source] for key, source in fields.items()}, "usage": 0}
                    for r in RESOURCES
                    if r in q
                },
            }
            for q in problem["queues"]
        ],
    }
