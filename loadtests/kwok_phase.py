"""One phase of the kwok load test: a fresh real cluster, its nodes and pods, a scheduler, a watch.

The cluster (realcluster/) is etcd + kube-apiserver + kwok; nodes and pods are created before
any scheduler runs, then the scheduler process starts and a watch opened before it records when
each pod is first seen bound. Around the measured window the apiserver's request counter and
the CPU time of every process are sampled, so the report can say who set the pace. The arrivals
mode (``kwok_arrivals.py``) uses the same cluster, scheduler process, watch and readings.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from k8s_adapter.api import KubeApi, KubeError, connect
from kai_ray.app.sim.cluster import KWOK_TAINT, synthetic_nodes
from loadtests.kwok_driver import percentile
from loadtests.kwok_readings import apiserver_requests, cpu_seconds, kai_ray_steps, request_delta
from loadtests.scheduler_log import startup_breakdown
from realcluster.cluster import ClusterOptions, RealCluster, free_port

NAMESPACE = "default"
REPO = Path(__file__).resolve().parent.parent
CRD_DIR = REPO / "helm" / "kai-ray" / "crds"
TOLERATION = {"key": KWOK_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
CONCURRENCY = 48
KAI = "kai-scheduler"
KUBE = "default-scheduler"


@dataclass
class PhaseResult:
    name: str
    scheduler: str
    nodes: int
    pods: int
    bound: int
    seconds: float  # scheduler start -> last pod seen bound
    first_bind: float  # scheduler start -> first pod seen bound
    bind_times: list[float] = field(default_factory=list)  # per pod, from scheduler start
    groups: int = 0
    partial_gangs: int = 0
    requests_per_second: float = 0.0  # the apiserver's, over the measured window
    requests_by_kind: dict[str, int] = field(default_factory=dict)  # "VERB resource[/sub]" -> count, same window
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # per process over the window
    setup_seconds: float = 0.0
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)  # kai-ray loop step -> (count, seconds)
    # kai-ray's log: its first bind answered, seconds after its process started, and the steps to it
    startup: tuple[float, str] | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float:
        return percentile(self.bind_times, q)


def _queue(name: str, parent: str | None) -> dict[str, Any]:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def load_pod(name: str, scheduler: str, group: str | None = None) -> dict[str, Any]:
    """One single-GPU pod that tolerates kwok's taint; KAI's queue label when kai-ray schedules it."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app": "kai-ray-load"}}
    if scheduler == KAI:
        metadata["labels"]["kai.scheduler/queue"] = "load-team"
    if group:
        metadata["annotations"] = {"pod-group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "schedulerName": scheduler,
            "tolerations": [TOLERATION],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


async def create_all(
    api: KubeApi,
    items: Sequence[tuple[str, dict[str, Any]]],
    errors: list[str],
    created: dict[str, float] | None = None,
) -> None:
    """POST every (path, object) with bounded concurrency; 429/5xx are retried. ``created``, when
    given, gets each object's name and the monotonic time the apiserver accepted it."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            path, obj = queue.get_nowait()
            for attempt in range(8):
                try:
                    await api.request("POST", path, body=obj)
                    if created is not None:
                        created[obj["metadata"]["name"]] = time.monotonic()
                    break
                except KubeError as error:
                    if error.status == 409:
                        break
                    if not error.transient or attempt == 7:
                        errors.append(f"create {obj['kind']} {obj['metadata']['name']}: {error}")
                        break
                    await asyncio.sleep(0.2 * (attempt + 1))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


class Watch:
    """Records when each load pod is first seen with a node, from a watch opened before scheduling."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.bound_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.errors: list[str] = []
        self.version = ""

    async def start(self) -> None:
        listed = await self.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", {"limit": 1})
        self.version = listed.body["metadata"]["resourceVersion"]

    async def run(self) -> None:
        while True:
            query = {"watch": True, "resourceVersion": self.version, "allowWatchBookmarks": True, "timeoutSeconds": 600}
            try:
                async for event in self.api.stream(f"/api/v1/namespaces/{NAMESPACE}/pods", query, 660):
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    self.version = meta.get("resourceVersion", self.version)
                    node = (obj.get("spec") or {}).get("nodeName")
                    if node and meta.get("name") not in self.bound_at:
                        self.bound_at[meta["name"]] = time.monotonic()
                        self.node_of[meta["name"]] = node
            except KubeError as error:
                self.errors.append(f"watch: {error}")
                await asyncio.sleep(0.2)


def scheduler_command(
    cluster: RealCluster, scheduler: str, shards: int | None, metrics_port: int, as_chart: bool = True
) -> list[str]:
    """The scheduler's command line. ``as_chart``: kai-ray as the chart runs it by default, with no
    pod grouper (pods without a PodGroup are scheduled as one-pod gangs in memory, as KAI's pod
    grouper would make them) and no DisruptionTarget mark; otherwise ``kai-ray run``'s own
    defaults, the pod grouper creating a PodGroup for each bare pod."""
    if scheduler == KUBE:  # the admin identity, as kai-ray's: API priority and fairness treats both alike
        return cluster.kube_scheduler_command("admin")
    command = [sys.executable, "-m", "kai_ray", "run", "--kubeconfig", str(cluster.kubeconfig("admin"))]
    command += ["--metrics-port", str(metrics_port)]
    if as_chart:
        command += ["--no-pod-grouper", "--no-mark-disruption-target"]
    if shards is not None:
        command += ["--shards", str(shards)]
    return command


def load_cluster() -> RealCluster:
    """A cluster for one phase (not started): etcd, kube-apiserver and kwok, no controller manager."""
    # Nothing would lift the not-ready taint the TaintNodesByCondition admission plugin puts on
    # each new node without the node lifecycle controller, so the plugin is off (the nodes are Ready).
    return RealCluster(
        ClusterOptions(kwok=True, extra_apiserver_args=("--disable-admission-plugins=TaintNodesByCondition",)),
        keep=bool(os.environ.get("KAI_RAY_E2E_KEEP")),
    )


def start_scheduler(cluster: RealCluster, command: list[str]) -> subprocess.Popen[bytes]:
    """The scheduler as a process of its own, its output in the cluster's ``scheduler.log``."""
    with scheduler_log(cluster).open("wb") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
        )


def scheduler_log(cluster: RealCluster) -> Path:
    return cluster.dir / "scheduler.log"


def stop_scheduler(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def populate(api: KubeApi, nodes: int, pods: Sequence[tuple[str, dict[str, Any]]], errors: list[str]) -> None:
    # No controller manager makes the namespace's `default` ServiceAccount, and pods are refused without it.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    await create_all(api, [(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account)], errors)
    for crd in sorted(CRD_DIR.glob("*.yaml")):
        body = yaml.safe_load(crd.read_text())
        await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=body)
    await asyncio.sleep(2)  # the CRDs become served
    await create_all(api, [("/apis/scheduling.run.ai/v2/queues", _queue("load-root", None))], errors)
    await create_all(api, [("/apis/scheduling.run.ai/v2/queues", _queue("load-team", "load-root"))], errors)
    await create_all(
        api, [("/api/v1/nodes", n) for n in synthetic_nodes(nodes, taint=True, prefix="kwok-load")], errors
    )
    await create_all(api, pods, errors)


async def run_phase(
    name: str,
    scheduler: str,
    nodes: int,
    pods: list[tuple[str, dict[str, Any]]],
    group_size: dict[str, int],
    shards: int | None = None,
    timeout: float = 900.0,
) -> PhaseResult:
    """A fresh cluster, populated, then ``scheduler`` started and timed until every pod is bound."""
    cluster = load_cluster()
    await asyncio.to_thread(cluster.start)
    scheduler_process: subprocess.Popen[bytes] | None = None
    errors: list[str] = []
    try:
        api = await connect(str(cluster.kubeconfig("admin")))
        try:
            began = time.monotonic()
            await populate(api, nodes, pods, errors)
            setup = time.monotonic() - began
            print(f"{name}, {scheduler}: cluster populated in {setup:.1f}s", file=sys.stderr)
            if errors:
                raise RuntimeError(f"populating the cluster failed ({len(errors)} errors), first: {errors[0]}")
            watch = Watch(api)
            await watch.start()
            watching = asyncio.create_task(watch.run())
            requests_before = await asyncio.to_thread(apiserver_requests, cluster)
            pids = {**cluster.pids(), "driver": os.getpid()}  # the driver: this process, the watch
            cpu_before = cpu_seconds(pids)
            metrics_port = free_port()
            started = time.monotonic()
            scheduler_process = start_scheduler(cluster, scheduler_command(cluster, scheduler, shards, metrics_port))
            pids["scheduler"] = scheduler_process.pid
            cpu_before["scheduler"] = 0.0
            expected = sum(1 for _, obj in pods if obj["kind"] == "Pod")
            while len(watch.bound_at) < expected and time.monotonic() - started < timeout:
                if scheduler_process.poll() is not None:
                    errors.append(f"{scheduler} exited with {scheduler_process.returncode}")
                    break
                await asyncio.sleep(0.1)
            window = time.monotonic() - started
            cpu_after = cpu_seconds(pids)
            steps = await asyncio.to_thread(kai_ray_steps, metrics_port) if scheduler == KAI else {}
            requests_after = await asyncio.to_thread(apiserver_requests, cluster)
            watching.cancel()
            made = request_delta(requests_before, requests_after)
            logged = scheduler_log(cluster).read_text(errors="replace") if scheduler == KAI else ""
            times = [at - started for at in watch.bound_at.values()]
            groups_bound: dict[str, int] = {}
            for _, obj in pods:
                group = (obj["metadata"].get("annotations") or {}).get("pod-group-name")
                if group and obj["metadata"]["name"] in watch.bound_at:
                    groups_bound[group] = groups_bound.get(group, 0) + 1
            partial = sum(1 for g, size in group_size.items() if 0 < groups_bound.get(g, 0) < size)
            return PhaseResult(
                name=name,
                scheduler=scheduler,
                nodes=nodes,
                pods=expected,
                bound=len(watch.bound_at),
                seconds=max(times) if times else window,
                first_bind=min(times) if times else 0.0,
                bind_times=times,
                groups=len(group_size),
                partial_gangs=partial,
                requests_per_second=(
                    sum(made.values()) / window if window and requests_before and requests_after else math.nan
                ),
                requests_by_kind=made,
                cpu_seconds={k: round(cpu_after.get(k, 0.0) - cpu_before.get(k, 0.0), 1) for k in pids},
                setup_seconds=setup,
                steps=steps,
                startup=startup_breakdown(logged),
                errors=(errors + watch.errors)[:10],
            )
        finally:
            await api.close()
    finally:
        stop_scheduler(scheduler_process)
        await asyncio.to_thread(cluster.stop)
