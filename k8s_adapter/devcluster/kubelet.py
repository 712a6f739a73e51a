"""Playing the kubelet for every node, as kwok does: bound pods start, finish, and go away.

- A pod bound to a node becomes Running (Ready, with container statuses) after a short delay.
- A running pod with annotation ``kai-ray.dev/run-seconds: N`` is Succeeded N seconds later.
- A terminating pod (deletionTimestamp) is removed after its grace period, capped so tests
  and demos do not wait long.
Durations are divided by ``speed``, so tests can run simulated time fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time

from k8s_adapter.devcluster.catalog import Catalog, Resource
from k8s_adapter.devcluster.store import ApiError, Obj, Store, now_rfc3339

log = logging.getLogger(__name__)
RUN_SECONDS = "kai-ray.dev/run-seconds"


class Kubelet:
    def __init__(self, store: Store, catalog: Catalog, start_delay: float = 0.2, max_grace: float = 2.0,
                 speed: float = 1.0, tick: float = 0.05) -> None:
        self.store = store
        self.catalog = catalog
        self.start_delay = start_delay
        self.max_grace = max_grace
        self.speed = speed
        self.tick = tick
        self._seen: dict[str, float] = {}  # pod uid -> when we first saw it bound or terminating
        self.started = 0
        self.completed = 0
        self.removed = 0

    async def run(self) -> None:
        while True:
            try:
                self.step(time.monotonic())
            except Exception:  # the simulator must keep running whatever one pod looks like
                log.exception("node simulator step failed")
            await asyncio.sleep(self.tick)

    def step(self, now: float) -> None:
        pods = self.catalog.find("", "v1", "pods")
        assert pods is not None
        for pod in self.store.list(pods)[0]:
            meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
            if not spec.get("nodeName"):
                continue
            uid = meta["uid"]
            if meta.get("deletionTimestamp"):
                first = self._seen.setdefault(uid + "/del", now)
                grace = min(float(meta.get("deletionGracePeriodSeconds") or 0), self.max_grace) / self.speed
                if now - first >= grace:
                    self._remove(pods, meta)
                continue
            phase = status.get("phase")
            if phase == "Pending":
                first = self._seen.setdefault(uid, now)
                if now - first >= self.start_delay / self.speed:
                    self._start(pods, pod)
            elif phase == "Running" and RUN_SECONDS in (meta.get("annotations") or {}):
                started = self._seen.setdefault(uid + "/run", now)
                if now - started >= float(meta["annotations"][RUN_SECONDS]) / self.speed:
                    self._finish(pods, pod)

    def _start(self, resource: Resource, pod: Obj) -> None:
        running = copy.deepcopy(pod)
        status = running["status"]
        status["phase"] = "Running"
        status["startTime"] = now_rfc3339()
        status["podIP"] = "10.0.0.1"
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conditions
        status["containerStatuses"] = [{"name": c.get("name"), "ready": True, "restartCount": 0,
                                        "image": c.get("image", ""), "state": {"running": {"startedAt": now_rfc3339()}}}
                                       for c in running["spec"].get("containers") or []]
        self._save(resource, running)
        self.started += 1

    def _finish(self, resource: Resource, pod: Obj) -> None:
        done = copy.deepcopy(pod)
        done["status"]["phase"] = "Succeeded"
        done["status"]["containerStatuses"] = [
            {"name": c.get("name"), "ready": False, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now_rfc3339()}}}
            for c in done["spec"].get("containers") or []]
        self._save(resource, done)
        self.completed += 1

    def _remove(self, resource: Resource, meta: Obj) -> None:
        with contextlib.suppress(ApiError):
            self.store.delete(resource, meta.get("namespace", ""), meta["name"])
            self.removed += 1

    def _save(self, resource: Resource, pod: Obj) -> None:
        with contextlib.suppress(ApiError):  # changed or deleted meanwhile; the next tick sees it
            self.store.replace(resource, pod)
