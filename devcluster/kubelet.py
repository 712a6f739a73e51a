"""The node simulator: plays the kubelet of every node (as kwok does) and the disruption controller.

It follows store changes instead of scanning, and keeps a timer heap of what is due:
- a pod bound to an existing node becomes Running (Ready, startTime, podIP, containerStatuses)
  ``start_delay`` simulated seconds after the simulator first sees it bound; a pod bound to a
  node that does not exist waits for that node to appear;
- a running pod annotated ``kai-ray.dev/run-seconds: "N"`` finishes N seconds after its start:
  Succeeded, or Failed when it also carries ``kai-ray.dev/exit-code`` other than "0";
- a pod with a deletionTimestamp is removed after its grace period, capped at ``max_grace``
  (finalizers still hold it, as upstream);
- PodDisruptionBudget status is recomputed for namespaces whose pods changed;
- starting a pod assigns GPU devices, builds the containers' environment and their output
  (``containers.py``): a missing ConfigMap keeps it Pending until the map appears.
Every timer re-reads the pod when it fires and does nothing if the pod moved on (other uid,
other phase), so stale timers are harmless. Durations are simulated seconds (see clock.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from typing import Any

from devcluster.catalog import ResourceType
from devcluster.claims import ClaimController
from devcluster.clock import Clock, parse_timestamp
from devcluster.containers import ConfigError, ContainerRuntime, Started
from devcluster.eviction import refresh_status
from devcluster.registry import Registry
from devcluster.store import Change

log = logging.getLogger(__name__)
Obj = dict[str, Any]
RUN_SECONDS = "kai-ray.dev/run-seconds"
EXIT_CODE = "kai-ray.dev/exit-code"
PDB_REFRESH_SECONDS = 0.2  # real seconds between disruption-budget status rewrites


class NodeSimulator:
    def __init__(self, registry: Registry, clock: Clock, start_delay: float = 0.5, max_grace: float = 2.0) -> None:
        self.registry = registry
        self.clock = clock
        self.start_delay = start_delay
        self.max_grace = max_grace
        catalog = registry.catalog
        self.pods = catalog.require("", "v1", "pods")
        self.nodes = catalog.require("", "v1", "nodes")
        self.pdbs = catalog.require("policy", "v1", "poddisruptionbudgets")
        self.config_maps = catalog.require("", "v1", "configmaps")
        self.runtime = ContainerRuntime()
        self.claims = ClaimController(registry)
        self.resource_claims = catalog.require("resource.k8s.io", "v1", "resourceclaims")
        self.logs: dict[str, dict[str, str]] = {}  # pod uid -> container -> what it printed
        self._timers: list[tuple[float, int, str, str, str, str]] = []  # (due, seq, action, ns, name, uid)
        self._due: dict[tuple[str, str], float] = {}  # (uid, action) -> earliest due, to avoid duplicates
        self._seq = itertools.count()
        self._waiting: dict[str, set[tuple[str, str]]] = {}  # missing node -> pods bound to it
        self._started: dict[str, float] = {}  # pod uid -> simulated second it started
        self._dirty_budgets: set[str] = set()
        self._addresses = itertools.count(1)
        self.wake = asyncio.Event()
        self.started = self.finished = self.removed = 0
        registry.store.listeners.append(self._on_change)

    # ------------------------------------------------------------------ following the store
    def _on_change(self, rt: ResourceType, change: Change) -> None:
        if self.claims.on_change(rt, change):
            self.wake.set()
        key = rt.storage_key
        if key == self.pods.storage_key:
            ns = change.obj["metadata"].get("namespace", "")
            if self.registry.store.table(self.pdbs).objects.get(ns):
                self._dirty_budgets.add(ns)
            if change.type == "DELETED":
                self._started.pop(change.obj["metadata"]["uid"], None)
                self.runtime.stop((change.obj.get("spec") or {}).get("nodeName"), change.obj["metadata"]["uid"])
            else:
                self.consider(change.obj)
        elif key == self.nodes.storage_key and change.type == "ADDED":
            for ns, name in self._waiting.pop(change.obj["metadata"]["name"], set()):
                pod = self.registry.store.get(self.pods, ns, name)
                if pod is not None:
                    self.consider(pod)
        elif key == self.pdbs.storage_key and (
            change.prev is None or change.obj.get("spec") != change.prev.get("spec")
        ):
            self._dirty_budgets.add(change.obj["metadata"].get("namespace", ""))
            self.wake.set()

    def consider(self, pod: Obj) -> None:
        """Schedule what comes next for ``pod``, if anything."""
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        now = self.clock.now()
        if meta.get("deletionTimestamp"):
            grace = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.max_grace)
            self._schedule(now + grace, "remove", meta)
            return
        node = spec.get("nodeName")
        phase = status.get("phase")
        if node and phase == "Pending":
            if self.registry.store.get(self.nodes, "", node) is None:
                self._waiting.setdefault(node, set()).add((meta.get("namespace", ""), meta["name"]))
                return
            self._schedule(now + self.start_delay, "start", meta)
        elif phase == "Running" and RUN_SECONDS in (meta.get("annotations") or {}):
            try:
                seconds = float(meta["annotations"][RUN_SECONDS])
            except ValueError:
                log.warning("pod %s/%s: %s is not a number", meta.get("namespace"), meta["name"], RUN_SECONDS)
                return
            self._schedule(self._start_of(pod) + seconds, "finish", meta)

    def _start_of(self, pod: Obj) -> float:
        started = self._started.get(pod["metadata"]["uid"])
        if started is not None:
            return started
        when = parse_timestamp(str((pod.get("status") or {}).get("startTime", "")))
        return (when - self.clock.wall(0)).total_seconds() if when else self.clock.now()

    def _schedule(self, due: float, action: str, meta: Obj) -> None:
        key = (meta["uid"], action)
        if key in self._due and self._due[key] <= due:
            return
        self._due[key] = due
        heapq.heappush(
            self._timers, (due, next(self._seq), action, meta.get("namespace", ""), meta["name"], meta["uid"])
        )
        self.wake.set()

    # ------------------------------------------------------------------ acting
    def step(self) -> int:
        """Fire every timer that is due; returns how many acted."""
        acted = self.claims.sync()
        now = self.clock.now()
        while self._timers and self._timers[0][0] <= now:
            due, _, action, ns, name, uid = heapq.heappop(self._timers)
            if self._due.get((uid, action)) == due:
                del self._due[(uid, action)]
            pod = self.registry.store.get(self.pods, ns, name)
            if pod is None or pod["metadata"]["uid"] != uid:
                continue
            try:
                acted += self._act(action, pod)
            except Exception:  # one odd pod must not stop every node
                log.exception("node simulator: %s of %s/%s failed", action, ns, name)
        return acted

    def refresh_budgets(self) -> int:
        dirty, self._dirty_budgets = self._dirty_budgets, set()
        return sum(refresh_status(self.registry, ns) for ns in dirty)

    def _act(self, action: str, pod: Obj) -> int:
        meta, status = pod["metadata"], pod.get("status") or {}
        if action == "remove":
            if meta.get("deletionTimestamp"):
                self.registry.finish_delete(self.pods, pod)
                self.removed += 1
                return 1
        elif meta.get("deletionTimestamp"):
            return 0
        elif action == "start" and status.get("phase") == "Pending" and (pod.get("spec") or {}).get("nodeName"):
            return self._start(pod)
        elif action == "finish" and status.get("phase") == "Running":
            self.runtime.stop(pod["spec"].get("nodeName"), meta["uid"])
            self.registry.store.replace(self.pods, {**pod, "status": self._finished(pod)})
            self.finished += 1
            return 1
        return 0

    def _start(self, pod: Obj) -> int:
        meta = pod["metadata"]
        node = self.registry.store.get(self.nodes, "", pod["spec"]["nodeName"]) or {}
        gpus = ((node.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0)
        namespace = meta.get("namespace", "")
        maps = {
            m["metadata"]["name"]: m
            for m in self.registry.store.table(self.config_maps).objects.get(namespace, {}).values()
        }
        try:
            self._claims_prepared(pod)
            started = self.runtime.start(pod, int(str(gpus or 0)), maps)
        except ConfigError as exc:  # the kubelet retries until the ConfigMap exists
            self._waiting_config(pod, str(exc))
            self._schedule(self.clock.now() + max(self.start_delay, 0.05), "start", meta)
            return 0
        except ValueError as exc:
            status = {**(pod.get("status") or {}), "phase": "Failed", "reason": "UnexpectedAdmissionError"}
            self.registry.store.replace(self.pods, {**pod, "status": {**status, "message": str(exc)}})
            return 1
        self.logs[meta["uid"]] = started.logs
        self.registry.store.replace(self.pods, self._with_annotations(pod, started, self._running(pod)))
        self.started += 1
        return 1

    def _claims_prepared(self, pod: Obj) -> None:
        """The kubelet prepares a pod's claims before its containers: each must be allocated and
        reserved for the pod (the scheduler's binder writes both before binding)."""
        meta = pod["metadata"]
        generated = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
            claim = (
                self.registry.store.get(self.resource_claims, meta.get("namespace", ""), str(name)) if name else None
            )
            status = (claim or {}).get("status") or {}
            if not status.get("allocation") or not any(
                r.get("uid") == meta["uid"] for r in status.get("reservedFor") or []
            ):
                raise ConfigError(f'resource claim "{entry.get("name")}" is not allocated and reserved for the pod')

    def log_of(self, pod: Obj, container: str | None) -> str:
        """What a started container printed (the first container's when none is named)."""
        logs = self.logs.get(pod["metadata"]["uid"], {})
        if container is None:
            names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
            container = str(names[0]) if names else ""
        return logs.get(container, "")

    @staticmethod
    def _with_annotations(pod: Obj, started: Started, status: Obj) -> Obj:
        meta = pod["metadata"]
        if started.annotations:
            meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **started.annotations}}
        return {**pod, "metadata": meta, "status": status}

    def _waiting_config(self, pod: Obj, message: str) -> None:
        status = dict(pod.get("status") or {})
        waiting = [
            {
                "name": c.get("name"),
                "image": c.get("image", ""),
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": message}},
            }
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        if status.get("containerStatuses") != waiting:
            self.registry.store.replace(self.pods, {**pod, "status": {**status, "containerStatuses": waiting}})

    def _running(self, pod: Obj) -> Obj:
        now = self.clock.timestamp()
        self._started[pod["metadata"]["uid"]] = self.clock.now()
        node = self.registry.store.get(self.nodes, "", pod["spec"]["nodeName"]) or {}
        host_ip = next(
            (
                a.get("address")
                for a in (node.get("status") or {}).get("addresses") or []
                if a.get("type") == "InternalIP"
            ),
            "10.0.0.1",
        )
        n = next(self._addresses)
        pod_ip = f"10.244.{(n >> 8) & 255}.{n & 255}"
        status = dict(pod.get("status") or {})
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
            conditions[kind] = {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        containers = (pod.get("spec") or {}).get("containers") or []
        status.update(
            {
                "phase": "Running",
                "conditions": list(conditions.values()),
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": now,
                "containerStatuses": [
                    {
                        "name": c.get("name"),
                        "image": c.get("image", ""),
                        "imageID": "",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "containerID": f"kwok://{c.get('name')}",
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in containers
                ],
            }
        )
        return status

    def _finished(self, pod: Obj) -> Obj:
        now = self.clock.timestamp()
        code = int((pod["metadata"].get("annotations") or {}).get(EXIT_CODE, "0") or 0)
        status = dict(pod.get("status") or {})
        conditions = []
        for condition in status.get("conditions") or []:
            if condition.get("type") in ("Ready", "ContainersReady"):
                condition = {**condition, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
            conditions.append(condition)
        statuses = []
        for container in status.get("containerStatuses") or []:
            started = ((container.get("state") or {}).get("running") or {}).get("startedAt", now)
            statuses.append(
                {
                    **container,
                    "ready": False,
                    "started": False,
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "reason": "Completed" if code == 0 else "Error",
                            "startedAt": started,
                            "finishedAt": now,
                            "containerID": container.get("containerID", ""),
                        }
                    },
                }
            )
        status.update(
            {"phase": "Succeeded" if code == 0 else "Failed", "conditions": conditions, "containerStatuses": statuses}
        )
        return status

    # ------------------------------------------------------------------ the loop
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_refresh = 0.0
        while True:
            self.wake.clear()
            self.step()
            if self._dirty_budgets and loop.time() >= next_refresh:
                self.refresh_budgets()  # at most every PDB_REFRESH_SECONDS, so a burst of pod changes costs one pass
                next_refresh = loop.time() + PDB_REFRESH_SECONDS
            waits = [self.clock.real_seconds(self._timers[0][0] - self.clock.now())] if self._timers else []
            if self._dirty_budgets:
                waits.append(max(0.0, next_refresh - loop.time()))
            timeout = min(waits) if waits else None
            if timeout is not None and timeout <= 0:
                await asyncio.sleep(0)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout)
