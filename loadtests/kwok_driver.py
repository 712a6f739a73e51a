"""Load driver for any cluster reachable by kubeconfig: a real kwok cluster or `kai-ray dev-cluster`.

It creates (optionally) kwok nodes, a queue tree and a job mix at a set rate, watches the
pods, and reports created -> bound latency (p50/p99), throughput and partial gangs (pod
groups left with some but fewer than minMember pods bound), which must be 0.

    python -m loadtests.kwok_driver --kubeconfig KUBECONFIG --pods 2000 --rate 200 [--create-nodes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from k8s_adapter.api import KubeApi, KubeError, connect
from kai_ray.app.sim.cluster import synthetic_nodes

NAMESPACE = "default"
GANG_SIZES = (1, 1, 1, 2, 4, 8)
GPU_CHOICES = (1, 1, 2, 4)  # GPUs per pod
FAKE_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


@dataclass
class LoadReport:
    nodes: int
    pods: int
    bound: int
    seconds: float
    pods_per_second: float
    latency_p50: float
    latency_p99: float
    partial_gangs: int
    groups: int
    created_per_second: float = 0.0
    errors: list[str] = field(default_factory=list)

    def text(self) -> str:
        return (
            f"nodes {self.nodes}, pods {self.pods}, bound {self.bound} in {self.seconds:.1f}s: "
            f"{self.pods_per_second:.0f} pods/s, created->bound p50 {self.latency_p50 * 1000:.0f} ms, "
            f"p99 {self.latency_p99 * 1000:.0f} ms, partial gangs {self.partial_gangs} of {self.groups}"
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank below; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def job_mix(
    pods: int, seed: int, queues: Sequence[str], gpu_choices: Sequence[int] = GPU_CHOICES
) -> list[tuple[str, str, int, int]]:
    """(name, queue, pods, gpus per pod) until ``pods`` pods are planned."""
    rng = random.Random(seed)
    jobs: list[tuple[str, str, int, int]] = []
    planned = 0
    while planned < pods:
        size = min(rng.choice(GANG_SIZES), pods - planned)
        jobs.append((f"load-{len(jobs):05d}", rng.choice(queues), size, rng.choice(gpu_choices)))
        planned += size
    return jobs


def _queue(name: str, parent: str | None) -> dict[str, Any]:
    open_quota = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {
        "resources": {"gpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1}, "cpu": open_quota, "memory": open_quota}
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def job_objects(
    name: str, queue: str, size: int, gpus: int, run_seconds: int | None, tolerate_kwok: bool
) -> list[tuple[str, dict[str, Any]]]:
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": size, "queue": queue},
    }
    objects = [(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NAMESPACE}/podgroups", group)]
    for i in range(size):
        annotations = {"pod-group-name": name}
        if run_seconds:
            annotations["kai-ray.dev/run-seconds"] = str(run_seconds)
        spec: dict[str, Any] = {
            "schedulerName": "kai-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        }
        if tolerate_kwok:
            spec["tolerations"] = [FAKE_TOLERATION]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "annotations": annotations,
                "labels": {"kai.scheduler/queue": queue, "app": "kai-ray-load"},
            },
            "spec": spec,
        }
        objects.append((f"/api/v1/namespaces/{NAMESPACE}/pods", pod))
    return objects


class Driver:
    def __init__(
        self,
        api: KubeApi,
        pods: int,
        rate: float,
        seed: int = 1,
        create_nodes: int = 0,
        run_seconds: int | None = None,
        tolerate_kwok: bool = False,
        timeout: float = 300.0,
        gpu_choices: Sequence[int] = GPU_CHOICES,
    ) -> None:
        self.api = api
        self.pods = pods
        self.rate = rate
        self.seed = seed
        self.create_nodes = create_nodes
        self.run_seconds = run_seconds
        self.tolerate_kwok = tolerate_kwok
        self.timeout = timeout
        self.gpu_choices = gpu_choices
        self.created_at: dict[str, float] = {}
        self.bound_at: dict[str, float] = {}
        self.group_of: dict[str, str] = {}
        self.group_size: dict[str, int] = {}
        self.errors: list[str] = []

    async def run(self) -> LoadReport:
        await self._setup()
        jobs = job_mix(self.pods, self.seed, ["load-team-a", "load-team-b", "load-team-c"], self.gpu_choices)
        watcher = asyncio.create_task(self._watch())
        started = time.monotonic()
        await self._create_jobs(jobs)
        created_seconds = time.monotonic() - started
        deadline = started + self.timeout
        while len(self.bound_at) < self.pods and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        watcher.cancel()
        latencies = [self.bound_at[k] - self.created_at[k] for k in self.bound_at if k in self.created_at]
        span = (max(self.bound_at.values()) - started) if self.bound_at else 0.0
        bound_per_group: dict[str, int] = {}
        for pod in self.bound_at:
            group = self.group_of.get(pod)
            if group:
                bound_per_group[group] = bound_per_group.get(group, 0) + 1
        partial = sum(1 for g, n in bound_per_group.items() if 0 < n < self.group_size[g])
        nodes = await self._count_nodes()
        return LoadReport(
            nodes,
            self.pods,
            len(self.bound_at),
            span,
            len(self.bound_at) / span if span else 0.0,
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            partial,
            len(self.group_size),
            self.pods / created_seconds if created_seconds else 0.0,
            self.errors[:10],
        )

    async def _setup(self) -> None:
        for node in synthetic_nodes(self.create_nodes, taint=self.tolerate_kwok, prefix="kai-ray-load"):
            await self._create("/api/v1/nodes", node)
        await self._create("/apis/scheduling.run.ai/v2/queues", _queue("load-root", None))
        for team in ("load-team-a", "load-team-b", "load-team-c"):
            await self._create("/apis/scheduling.run.ai/v2/queues", _queue(team, "load-root"))

    async def _create(self, path: str, obj: dict[str, Any]) -> None:
        try:
            await self.api.request("POST", path, body=obj)
        except KubeError as exc:
            if exc.status != 409:
                self.errors.append(f"create {path}: {exc}")

    async def _create_jobs(self, jobs: list[tuple[str, str, int, int]]) -> None:
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        next_at = time.monotonic()
        pending: list[asyncio.Task[None]] = []
        for name, queue, size, gpus in jobs:
            self.group_size[name] = size
            for path, obj in job_objects(name, queue, size, gpus, self.run_seconds, self.tolerate_kwok):
                if obj["kind"] == "Pod":
                    key = f"{NAMESPACE}/{obj['metadata']['name']}"
                    self.group_of[key] = name
                    self.created_at[key] = time.monotonic()
                    next_at += interval
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                pending.append(asyncio.create_task(self._create(path, obj)))
                if len(pending) >= 64:
                    await asyncio.gather(*pending)
                    pending.clear()
        await asyncio.gather(*pending)

    async def _watch(self) -> None:
        query = {"watch": True, "labelSelector": "app=kai-ray-load", "timeoutSeconds": int(self.timeout) + 60}
        while True:
            try:
                async for event in self.api.stream(f"/api/v1/namespaces/{NAMESPACE}/pods", query, self.timeout + 90):
                    obj = event.get("object") or {}
                    key = f"{NAMESPACE}/{(obj.get('metadata') or {}).get('name')}"
                    if (obj.get("spec") or {}).get("nodeName") and key not in self.bound_at:
                        self.bound_at[key] = time.monotonic()
            except KubeError as exc:
                self.errors.append(f"watch: {exc}")
                await asyncio.sleep(0.2)

    async def _count_nodes(self) -> int:
        try:
            return len((await self.api.request("GET", "/api/v1/nodes")).body.get("items") or [])
        except KubeError:
            return 0


async def main_async(args: argparse.Namespace) -> LoadReport:
    api = await connect(args.kubeconfig)
    try:
        return await Driver(
            api, args.pods, args.rate, args.seed, args.create_nodes, args.run_seconds, args.tolerate_kwok, args.timeout
        ).run()
    finally:
        await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0, help="pods created per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--create-nodes", type=int, default=0, help="kwok nodes to create first")
    parser.add_argument("--tolerate-kwok", action="store_true", help="pods tolerate kwok's node taint")
    parser.add_argument("--run-seconds", type=int, help="dev cluster: pods complete after this many seconds")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", help="write the report as JSON here")
    args = parser.parse_args(argv)
    report = asyncio.run(main_async(args))
    print(report.text())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(asdict(report), out, indent=1)
    return 0 if report.partial_gangs == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
