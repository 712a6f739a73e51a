"""What the running scheduler believes, against a fresh from-scratch session on the same objects.

At a quiet point (nothing changing, nothing in flight), ``kai-ray run``'s incremental state must
equal what ``kai-ray schedule --snapshot`` makes of the same objects from scratch:

- free capacity per node: the running shards' holds, the fresh session's table, and a recount
  from the pods themselves must agree three ways (``kai_ray.app.sim.accounting``);
- bound pods: every pod's state and node in the running model, as the objects say;
- pending reasons: the running scheduler's last cycle and the fresh session decide every pod
  the same way (status, node, reason), and queues get the same fair share and allocation.

Any difference is a line of text; the caller fails with the seed.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml

from coordinator.coordinator import Coordinator, CycleResult
from coordinator.session_cache import SessionCache
from coordinator.session_open import open_session
from kai_ray.app.cli.main import main
from kai_ray.app.sim import accounting
from kai_ray.config import SchedulerConfig
from kai_ray.io.snapshot_loader import snapshot_from_documents
from kai_ray.model import ClusterSnapshot
from placement.rows import export_holds

Obj = dict[str, Any]
KINDS = (
    ("", "v1", "nodes", "Node"),
    ("", "v1", "pods", "Pod"),
    ("scheduling.run.ai", "v2", "queues", "Queue"),
    ("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup"),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass"),
)


def dump(objects: dict[str, list[Obj]]) -> list[Obj]:
    """The objects as ``kubectl get -o yaml`` lists them (kind and apiVersion on every item)."""
    items: list[Obj] = []
    for group, version, _, kind in KINDS:
        api_version = f"{group}/{version}" if group else version
        items.extend({**obj, "apiVersion": api_version, "kind": kind} for obj in objects[kind])
    return items


def fresh_decisions(items: list[Obj], config_path: Path, workdir: Path) -> dict[str, Any]:
    """``kai-ray schedule --snapshot`` on these objects, run as the CLI runs it."""
    snapshot = workdir / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["schedule", "--snapshot", str(snapshot), "--config", str(config_path), "-o", "json"])
    if code != 0:
        raise AssertionError(f"kai-ray schedule failed on the cluster's objects: {err.getvalue().strip()}")
    decisions: dict[str, Any] = json.loads(out.getvalue())
    return decisions


def node_differences(coordinator: Coordinator, snapshot: ClusterSnapshot, config: SchedulerConfig) -> list[str]:
    running = accounting.from_holds(coordinator.shards.every_hold())
    fresh = accounting.from_holds([export_holds(open_session(snapshot, config, 0.0).table)])
    counted = accounting.from_pods(snapshot.pods, [n.name for n in snapshot.nodes])
    out = [f"running vs fresh session: {d}" for d in accounting.differences(running, fresh)]
    out += [f"running vs recount from pods: {d}" for d in accounting.differences(running, counted)]
    return out


def pod_differences(coordinator: Coordinator, snapshot: ClusterSnapshot) -> list[str]:
    model = coordinator.model.pods
    out = []
    for pod in snapshot.pods:
        known = model.get(pod.key)
        if known is None:
            out.append(f"{pod.key}: {pod.state.value} on {pod.node}, unknown to the running scheduler")
        elif (known.state, known.node, known.uid) != (pod.state, pod.node, pod.uid):
            said = f"{known.state.value} on {known.node}"
            out.append(f"{pod.key}: running model says {said}, the object {pod.state.value} on {pod.node}")
    for key in sorted(set(model) - {p.key for p in snapshot.pods}):
        out.append(f"{key}: in the running model, but no such pod")
    return out


def queue_sum_differences(coordinator: Coordinator) -> list[str]:
    """Each job's contribution to its queue's sums as the running scheduler keeps them across
    cycles, against the same counted afresh from the model's records: a kept contribution that
    drifted shows here with its job, before it shows as a queue deciding differently."""
    model = coordinator.model
    fresh = SessionCache(coordinator.sessions.config)
    fresh.nodes.refresh(model)
    dirty, _ = fresh._tasks(model, None, None)
    fresh._jobs(model, dirty, None, None)
    fresh.queues(model, fresh.kept.capacity())
    kept, counted = coordinator.sessions.totals.contributions(), fresh.totals.contributions()
    out = []
    for job in sorted(set(kept) | set(counted)):
        if kept.get(job) != counted.get(job):
            tasks = fresh.jobs[job].tasks if job in fresh.jobs else []
            records = ", ".join(f"{t.key} {t.status.value} on {t.node}" for t in tasks)
            out.append(f"queue sums of job {job}: kept {kept.get(job)}, counted afresh {counted.get(job)} ({records})")
    return out


def _decision(pod: dict[str, Any]) -> tuple[Any, ...]:
    return (pod["status"], pod["node"], tuple(pod.get("gpuGroups") or ()), pod.get("reason"))


def decision_differences(last: CycleResult, fresh: dict[str, Any], ours: set[str]) -> list[str]:
    running = last.decisions.to_json()
    out = []
    for key in sorted(ours):
        mine, theirs = running["pods"].get(key), fresh["pods"].get(key)
        if mine is None or theirs is None:
            out.append(f"{key}: decided only {'from scratch' if mine is None else 'by the running scheduler'}")
        elif (mine["status"], mine["node"], mine.get("reason")) != (
            theirs["status"],
            theirs["node"],
            theirs.get("reason"),
        ):
            out.append(
                f"{key}: running {mine['status']} on {mine['node']} ({mine.get('reason', '')}), "
                f"from scratch {theirs['status']} on {theirs['node']} ({theirs.get('reason', '')})"
            )
    if running["queues"] != fresh["queues"]:
        out.append(f"queues: running {running['queues']}, from scratch {fresh['queues']}")
    return out


def compare(
    coordinator: Coordinator,
    last: CycleResult,
    objects: dict[str, list[Obj]],
    config: SchedulerConfig,
    config_path: Path,
    workdir: Path,
) -> list[str]:
    """Every difference between the running scheduler and a fresh session (empty: none)."""
    items = dump(objects)
    snapshot = snapshot_from_documents(items, "<cluster>", config.schedulerName)
    fresh = fresh_decisions(items, config_path, workdir)
    ours = {p.key for p in snapshot.pods if p.scheduler_name == config.schedulerName}
    return (
        node_differences(coordinator, snapshot, config)
        + pod_differences(coordinator, snapshot)
        + queue_sum_differences(coordinator)
        + decision_differences(last, fresh, ours)
    )


def overcommitted(objects: dict[str, list[Obj]]) -> list[str]:
    """Nodes whose holding pods ask for more than the node has (GPUs, shared GPUs, CPU, memory)."""
    items = dump(objects)
    snapshot = snapshot_from_documents(items, "<cluster>")
    counted = accounting.from_pods(snapshot.pods, [n.name for n in snapshot.nodes])
    out = []
    for i, node in enumerate(snapshot.nodes):
        cpu, memory, gpus, pods = counted.amounts[i]
        shared = len(counted.shared.get(node.name, ()))
        alloc = node.allocatable
        for label, used, have in (
            ("GPUs", gpus + shared, alloc.gpu),
            ("cpu", cpu, alloc.cpu),
            ("memory", memory, alloc.memory),
            ("pods", pods, alloc.pods),
        ):
            if used > have + 1e-6:
                out.append(f"{node.name}: {used:g} {label} held of {have:g}")
    portions: dict[str, float] = {}
    for pod in snapshot.pods:
        if pod.gpu_share is not None and pod.gpu_share.fraction and pod.node and pod.state.holds_node:
            for group in pod.gpu_groups:
                portions[f"{pod.node}/{group}"] = portions.get(f"{pod.node}/{group}", 0.0) + pod.gpu_share.fraction
    out += [f"shared GPU {g}: {p:g} of one device" for g, p in sorted(portions.items()) if p > 1 + 1e-6]
    return out
