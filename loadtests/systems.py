"""The systems the benchmarks compare, built the same way everywhere: in-process coordinators
(baseline, in process, Ray shard actors) and schedulers started on a real cluster (kai-ray,
kube-scheduler, KAI itself) behind one interface, ``ClusterScheduler``."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Protocol

import yaml

from coordinator.coordinator import Coordinator
from coordinator.shard_client import InProcessTransport
from coordinator.shard_set import ShardSet
from k8s_adapter.api import KubeApi, KubeError
from kai_ray.config import SchedulerConfig
from loadtests.baseline import FullScanCoordinator
from loadtests.kwok_phase import CRD_DIR, KAI, NAMESPACE, scheduler_command, start_scheduler, stop_scheduler
from placement.placer import PlacementPolicy
from realcluster.cluster import RealCluster, free_port
from realcluster.kai import COMPONENTS as KAI_COMPONENTS
from realcluster.kai import KaiDeployment, KaiOptions
from shards.shard import Shard

CONFIG = SchedulerConfig()


def baseline(config: SchedulerConfig = CONFIG) -> Coordinator:
    """The per-pod full scan over every node of the cluster (``loadtests.baseline``)."""
    return FullScanCoordinator(config, ShardSet(InProcessTransport([Shard(0, PlacementPolicy.of(config))])))


def in_process(config: SchedulerConfig = CONFIG, shards: int = 1) -> Coordinator:
    policy = PlacementPolicy.of(config)
    return Coordinator(config, ShardSet(InProcessTransport([Shard(i, policy) for i in range(shards)])))


def on_ray(shards: int, config: SchedulerConfig = CONFIG) -> Coordinator:
    """The coordinator in this process, its shards as Ray actors (started before any clock)."""
    from kai_ray.app.actors import RayTransport, ensure_ray

    ensure_ray()
    transport = RayTransport(shards, PlacementPolicy.of(config))
    transport.wait_ready()
    return Coordinator(config, ShardSet(transport))


# ---------------------------------------------------------------- schedulers started on a real cluster
class ClusterScheduler(Protocol):
    """A scheduler under test on a RealCluster: ``install`` puts what it needs on the cluster and
    starts whatever runs beside it (KAI's podgrouper, binder and controllers); ``start`` and
    ``stop`` are the scheduler process alone, so a load test can create its pods while the
    scheduler is off (as KAI's scale tests do) and time it from its start."""

    name: str  # as the report names it
    scheduler_name: str  # the pods' spec.schedulerName
    gangs: bool  # understands Queues and PodGroups (kube-scheduler runs plain pods only)

    async def install(self, cluster: RealCluster, api: KubeApi) -> None: ...

    async def settled(self, api: KubeApi, pods: int, timeout: float) -> bool:
        """True once what runs beside the scheduler has caught up with ``pods`` created pods."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None:
        """Everything ``install`` and ``start`` started ends."""
        ...

    def pids(self) -> dict[str, int]:
        """Component -> pid; the scheduler proper is ``scheduler`` (its children counted with it)."""
        ...

    def check(self) -> None:
        """Raise if a process of this system has died."""
        ...


CRD_PATHS = (
    "/apis/scheduling.run.ai/v2/queues",
    f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups",
    "/apis/kai.scheduler/v1alpha1/topologies",
)


async def install_crds(api: KubeApi, timeout: float = 60.0) -> None:
    """kai-ray's chart's CRDs (Queue, PodGroup, Topology), and wait until they are served; KAI
    installs its own."""
    for crd in sorted(CRD_DIR.glob("*.yaml")):
        body = yaml.safe_load(crd.read_text())
        try:
            await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=body)
        except KubeError as error:
            if error.status != 409:
                raise
    deadline = time.monotonic() + timeout
    for path in CRD_PATHS:
        while True:
            try:
                await api.request("GET", path, {"limit": 1})
                break
            except KubeError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


class ProcessScheduler:
    """kai-ray or kube-scheduler: one process of the command ``kwok_phase`` builds for it."""

    def __init__(self, scheduler: str, shards: int | None = None) -> None:
        self.name = "kai-ray" if scheduler == KAI else "kube-scheduler"
        self.scheduler_name = scheduler
        self.gangs = scheduler == KAI
        self.shards = shards
        self.cluster: RealCluster | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_port = 0

    async def install(self, cluster: RealCluster, api: KubeApi) -> None:
        self.cluster = cluster
        await install_crds(api)

    async def settled(self, api: KubeApi, pods: int, timeout: float) -> bool:
        return True  # nothing runs beside it

    def start(self) -> None:
        if self.cluster is None:
            raise RuntimeError("install before start")
        self.metrics_port = free_port()
        # kai-ray as its chart runs it by default (no pod grouper: bare pods are one-pod gangs).
        command = scheduler_command(self.cluster, self.scheduler_name, self.shards, self.metrics_port)
        self.process = start_scheduler(self.cluster, command)

    def stop(self) -> None:
        stop_scheduler(self.process)
        self.process = None

    def close(self) -> None:
        self.stop()

    def pids(self) -> dict[str, int]:
        return {"scheduler": self.process.pid} if self.process is not None else {}

    def check(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}")


class KaiScheduler:
    """KAI itself (``realcluster.kai``): its podgrouper, binder, podgroupcontroller and
    queuecontroller from ``install`` on, its scheduler between ``start`` and ``stop``."""

    name = "KAI"
    scheduler_name = KAI
    gangs = True

    def __init__(self, options: KaiOptions | None = None) -> None:
        self.options = options or KaiOptions()
        self.deployment: KaiDeployment | None = None

    async def install(self, cluster: RealCluster, api: KubeApi) -> None:
        self.deployment = KaiDeployment(cluster, self.options)
        others = [c for c in KAI_COMPONENTS if c != "scheduler"]
        await asyncio.to_thread(self.deployment.start, components=others)

    async def settled(self, api: KubeApi, pods: int, timeout: float) -> bool:
        """Every pod carries the PodGroup the podgrouper made or the driver named, so the
        scheduler's clock does not run while the podgrouper catches up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
            items = listed.body.get("items") or []
            grouped = sum(1 for p in items if "pod-group-name" in (p["metadata"].get("annotations") or {}))
            if len(items) >= pods and grouped == len(items):
                return True
            self.check()
            await asyncio.sleep(1.0)
        return False

    def _deployment(self) -> KaiDeployment:
        if self.deployment is None:
            raise RuntimeError("install before start")
        return self.deployment

    def start(self) -> None:
        self._deployment().start_component("scheduler")

    def stop(self) -> None:
        if "scheduler" in self._deployment().components:
            self._deployment().stop_component("scheduler")

    def close(self) -> None:
        if self.deployment is not None:
            self.deployment.stop()

    def pids(self) -> dict[str, int]:
        return self.deployment.pids() if self.deployment is not None else {}

    def check(self) -> None:
        self._deployment().check()
