"""One KAI scale scenario for one scheduler: a fresh real cluster, the scenario's objects, the
scheduler, the timing until the scenario's done condition, and what the cluster holds at the end.

The cluster, the watch that times binds, the apiserver's request counter and the CPU readings
are the kwok load test's (``kwok_phase``); the scheduler is a ``systems.ClusterScheduler``.
Set-up (filling the cluster before a reclaim is measured, for instance) is not timed; a window
of ``Window`` is, and only the scheduler's and its helpers' work in it is counted against it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k8s_adapter.api import KubeApi, KubeError, connect
from loadtests.kai_scale_scenarios import BY_KEY, NAMESPACE, Scenario, Size
from loadtests.kai_scale_state import GROUPS, PATHS, PODS, final_state, settle_running
from loadtests.kwok_phase import Watch, create_all, load_cluster
from loadtests.kwok_readings import apiserver_requests, cpu_seconds, request_delta
from loadtests.systems import ClusterScheduler
from realcluster.cluster import RealCluster

Obj = dict[str, Any]
UNSCHEDULABLE = "UnschedulableOnNodePool"


@dataclass
class Outcome:
    """One (scenario, system): the scenario's figure and what its measured window cost."""

    scenario: str
    system: str
    nodes: int
    status: str = "ok"  # "ok", "timed out", "set-up timed out", "failed: ..."
    seconds: float | None = None  # the scenario's figure (an average for the sampled ones)
    pods: int = 0  # the pods (or samples) the scenario waits for
    done: int = 0  # of them, done when the window closed
    window: float = 0.0  # wall seconds of the measured window
    samples: list[float] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)  # apiserver, over the window
    cpu: dict[str, float] = field(default_factory=dict)  # per process, over the window
    setup_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def pods_per_second(self) -> float | None:
        return self.done / self.window if self.window > 0 and self.done else None

    @property
    def requests_per_pod(self) -> float | None:
        return sum(self.requests.values()) / self.pods if self.requests and self.pods else None

    def to_json(self) -> Obj:
        out = {k: v for k, v in vars(self).items()}
        out.update(podsPerSecond=self.pods_per_second, requestsPerPod=self.requests_per_pod)
        return out


class GroupWatch:
    """When each PodGroup is first seen with KAI's UnschedulableOnNodePool condition."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.unschedulable_at: dict[str, float] = {}
        self.version = ""

    async def start(self) -> None:
        self.version = (await self.api.request("GET", GROUPS, {"limit": 1})).body["metadata"]["resourceVersion"]

    async def run(self) -> None:
        while True:
            query = {"watch": True, "resourceVersion": self.version, "allowWatchBookmarks": True, "timeoutSeconds": 600}
            try:
                async for event in self.api.stream(GROUPS, query, 660):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    self.version = meta.get("resourceVersion", self.version)
                    conditions = (obj.get("status") or {}).get("schedulingConditions") or []
                    name = meta.get("name", "")
                    if name not in self.unschedulable_at and any(c.get("type") == UNSCHEDULABLE for c in conditions):
                        self.unschedulable_at[name] = time.monotonic()
            except KubeError:
                await asyncio.sleep(0.2)


class Window:
    """The measured part: the apiserver's requests and each process's CPU between ``open`` and ``close``."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.began = 0.0
        self.requests: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.pids: dict[str, int] = {}

    async def open(self) -> None:
        self.requests = await asyncio.to_thread(apiserver_requests, self.run.cluster)
        self.pids = {**self.run.cluster.pids(), **self.run.system.pids(), "driver": os.getpid()}
        self.cpu = cpu_seconds(self.pids)
        self.began = time.monotonic()

    def track(self) -> None:
        """Processes started since ``open`` (the scheduler) are counted from zero."""
        for name, pid in self.run.system.pids().items():
            if self.pids.get(name) != pid:
                self.pids[name], self.cpu[name] = pid, 0.0

    async def close(self, outcome: Outcome) -> None:
        outcome.window = time.monotonic() - self.began
        self.track()
        after = cpu_seconds(self.pids)
        outcome.cpu = {k: round(after.get(k, 0.0) - self.cpu.get(k, 0.0), 1) for k in self.pids}
        outcome.requests = request_delta(self.requests, await asyncio.to_thread(apiserver_requests, self.run.cluster))


class Run:
    """What a scenario's steps share: the cluster, the API, the scheduler, the watches, the names."""

    def __init__(self, cluster: RealCluster, api: KubeApi, system: ClusterScheduler, size: Size, scenario: Scenario):
        self.cluster, self.api, self.system, self.size, self.scenario = cluster, api, system, size, scenario
        self.watch = Watch(api)
        self.groups = GroupWatch(api)
        self.created: dict[str, str] = {}  # pods the driver created -> their queue
        self.removed: set[str] = set()  # pods the driver deleted (not evictions)
        self.errors: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.timeout = size.timeout(scenario)
        # Filling the cluster before a reclaim is measured takes as long as the fill scenario.
        self.setup_timeout = size.timeout(BY_KEY["fill"])

    async def watch_pods(self) -> None:
        await self.watch.start()
        await self.groups.start()
        self.tasks += [asyncio.create_task(self.watch.run()), asyncio.create_task(self.groups.run())]

    async def create(self, objects: Sequence[Obj]) -> float:
        """POST every object (PodGroups before their pods); the monotonic time the last was accepted."""
        for o in objects:
            if o["kind"] == "Pod":
                self.created[o["metadata"]["name"]] = o["metadata"]["labels"].get("kai.scheduler/queue", "")
        for kind in ("Queue", "Node", "Topology", "PodGroup", "Pod"):
            items = [(PATHS[kind], o) for o in objects if o["kind"] == kind]
            if items:
                await create_all(self.api, items, self.errors)
        if self.errors:
            raise RuntimeError(f"creating objects failed ({len(self.errors)} errors), first: {self.errors[0]}")
        return time.monotonic()

    async def delete(self, path: str, names: Sequence[str]) -> None:
        if path == PODS:
            self.removed.update(names)
        for name in names:
            try:
                await self.api.request("DELETE", f"{path}/{name}", body={"gracePeriodSeconds": 0})
            except KubeError as error:
                if error.status != 404:
                    self.errors.append(f"delete {name}: {error}")

    async def patch_queue(self, name: str, spec: Obj) -> None:
        await self.api.request(
            "PATCH", f"{PATHS['Queue']}/{name}", body={"spec": spec}, content_type="application/merge-patch+json"
        )

    async def start_scheduler(self) -> float:
        began = time.monotonic()
        await asyncio.to_thread(self.system.start)
        return began

    async def stop_scheduler(self) -> None:
        await asyncio.to_thread(self.system.stop)

    async def settled(self, pods: int) -> None:
        if not await self.system.settled(self.api, pods, self.timeout):
            raise TimeoutError("the scheduler's helpers did not catch up with the pods created")

    async def until(self, done: Callable[[], bool], deadline: float) -> bool:
        while not done():
            if time.monotonic() > deadline:
                return False
            self.system.check()
            await asyncio.sleep(0.1)
        return True

    async def until_in(self, seen: Mapping[str, float], name: str, deadline: float) -> bool:
        return await self.until(lambda: name in seen, deadline)

    def bound(self, names: Sequence[str]) -> int:
        return sum(1 for n in names if n in self.watch.bound_at)

    async def running(self, names: Sequence[str], deadline: float) -> bool:
        """Every pod of ``names`` Running (kwok's pod-start stage), polled once a second."""
        wanted = set(names)
        while True:
            items = (await self.api.request("GET", PODS)).body.get("items") or []
            if wanted <= {p["metadata"]["name"] for p in items if (p.get("status") or {}).get("phase") == "Running"}:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(1.0)

    async def fill(self, objects: Sequence[Obj]) -> None:
        """Set-up, not timed: the pods created with the scheduler off, then the scheduler on
        until every one of them is bound and Running (KAI's fillClusterWithJobs)."""
        began = time.monotonic()
        names = [o["metadata"]["name"] for o in objects if o["kind"] == "Pod"]
        await self.create(objects)
        await self.settled(len(self.created))
        await self.start_scheduler()
        deadline = began + self.setup_timeout
        if not await self.until(lambda: self.bound(names) == len(names), deadline) or not await self.running(
            names, deadline
        ):
            raise TimeoutError(f"set-up: {self.bound(names)}/{len(names)} pods bound in {self.setup_timeout:.0f}s")

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()


Steps = Callable[[Run, Outcome], Awaitable[None]]


async def run_scenario(scenario: Scenario, system: ClusterScheduler, size: Size, steps: Steps) -> tuple[Outcome, Obj]:
    """A fresh cluster for ``system``, ``steps`` run on it; never raises for the scenario's
    sake: a timeout or a failure is the outcome's status."""
    outcome = Outcome(scenario.key, system.name, size.nodes)
    state: Obj = {}
    cluster = load_cluster()
    began = time.monotonic()
    try:
        await asyncio.to_thread(cluster.start)
        api = await connect(str(cluster.kubeconfig("admin")))
        run = Run(cluster, api, system, size, scenario)
        try:
            # No controller manager makes the namespace's `default` ServiceAccount; pods need it.
            account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            await create_all(api, [(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account)], run.errors)
            await system.install(cluster, api)
            await run.watch_pods()
            await steps(run, outcome)
            await settle_running(api)
            state = await final_state(api, run.created, run.removed)
        except TimeoutError as error:
            outcome.status = "set-up timed out" if "set-up" in str(error) else "timed out"
            outcome.errors.append(str(error))
            state = await final_state(api, run.created, run.removed)
        finally:
            outcome.errors += run.errors[:10]
            await run.close()
            await api.close()
    except Exception as error:  # a scenario that breaks is reported, and the next one runs
        outcome.status = f"failed: {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    finally:
        try:
            system.close()
        finally:
            await asyncio.to_thread(cluster.stop)
    outcome.setup_seconds = round(time.monotonic() - began - outcome.window, 1)
    print(f"kai_scale: {scenario.key} / {system.name}: {outcome.status}, {outcome.seconds}", file=sys.stderr)
    return outcome, state
