"""A reclaim storm through `kai-ray run`'s loop on the dev cluster: how long its sessions get.

The dev cluster runs in its own process with N synthetic nodes. Queue `storm-a` fills every GPU
with preemptible one-GPU jobs; then `storm-b`, owed half the cluster by quota as `storm-a` is,
submits one-GPU jobs for more than its half. The scheduler loop (the live loop's configuration:
sessions bounded by `sessionTimeBudget`, 1 s unless configured; an in-process coordinator, as
`kai-ray run --shards 0`) reclaims until `storm-b` holds its share. Reported: the longest session
while it does (the time budget must bound it), the session p50/p99, how long until `storm-b`
holds its share, and the evictions; the run fails when a session outlasts the budget by more
than a cycle's fixed costs or `storm-b` never gets its share.

    python -m loadtests.devcluster_storm --nodes 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

from coordinator.coordinator import Coordinator
from k8s_adapter.api import KubeApi
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import model_nodes
from kai_ray.config import SchedulerConfig
from loadtests.dev_cluster_run import dev_cluster, scheduling
from loadtests.kwok_driver import NAMESPACE, job_objects

QUEUES = "/apis/scheduling.run.ai/v2/queues"
# A session may run past the budget by what it does after the last search: committing, binding
# and deciding every pod. Beyond this, the budget did not hold.
BUDGET_SLACK = 0.5


@dataclass
class StormReport:
    nodes: int
    gpus: int
    storm_b_jobs: int
    seconds_to_share: float | None  # from storm-b's first job to holding its share; None: never
    seconds_to_create: float  # the driver's creates of storm-b's jobs, one request at a time
    sessions: list[float]
    evictions: int
    budget: float

    @property
    def longest(self) -> float:
        return max(self.sessions, default=0.0)

    def text(self) -> str:
        ordered = sorted(self.sessions)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0
        share = "never" if self.seconds_to_share is None else f"{self.seconds_to_share:.1f} s"
        return (
            f"{self.nodes} nodes, {self.gpus} GPUs full of storm-a; storm-b submits {self.storm_b_jobs} one-GPU jobs\n"
            f"storm-b holds its share ({self.gpus // 2} GPUs) after {share} (its jobs created in "
            f"{self.seconds_to_create:.1f} s); {self.evictions} pods evicted\n"
            f"sessions while it reclaimed: {len(self.sessions)}, p50 {statistics.median(self.sessions or [0]):.3f} s, "
            f"p99 {p99:.3f} s, longest {self.longest:.3f} s (budget {self.budget:g} s)"
        )


def queue_object(name: str, parent: str | None, gpu_quota: float) -> dict[str, Any]:
    open_quota = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    gpu = {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"gpu": gpu, "cpu": open_quota, "memory": open_quota}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


async def _create_jobs(api: KubeApi, prefix: str, queue: str, count: int, preemptible: bool) -> None:
    for i in range(count):
        for path, obj in job_objects(f"{prefix}-{i:05d}", queue, 1, 1, None, tolerate_kwok=False):
            if obj["kind"] == "PodGroup":
                obj["spec"]["preemptibility"] = "preemptible" if preemptible else "non-preemptible"
            await api.request("POST", path, body=obj)


async def _bound(api: KubeApi, queue: str) -> int:
    answer = await api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    bound = 0
    for pod in answer.body.get("items", ()):
        meta = pod["metadata"]
        if meta.get("labels", {}).get("kai.scheduler/queue") == queue and not meta.get("deletionTimestamp"):
            bound += bool(pod["spec"].get("nodeName"))
    return bound


async def _wait_until(api: KubeApi, queue: str, wanted: int, timeout: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if await _bound(api, queue) >= wanted:
            return time.monotonic() - started
        await asyncio.sleep(0.5)
    return None


async def run(nodes: int, period: float, timeout: float) -> StormReport:
    gpus = sum(int(n.allocatable.gpu) for n in model_nodes(nodes))
    config = SchedulerConfig().for_live_loop()
    sessions: list[float] = []
    recording = [False]
    evictions = [0]

    def make(_: int) -> Coordinator:
        coordinator = in_process_coordinator(config)
        cycle = coordinator.cycle

        def timed(now: float, actions: Any = None) -> Any:
            result = cycle(now, actions)
            if recording[0] and not result.stats.reused:
                sessions.append(result.stats.seconds)
                evictions[0] += len(result.evictions)
            return result

        coordinator.cycle = timed  # type: ignore[method-assign]
        return coordinator

    async with (
        dev_cluster(nodes) as kubeconfig,
        scheduling(kubeconfig, config.schedulerName, make, period) as (
            driver_api,
            _,
        ),
    ):
        await driver_api.request("POST", QUEUES, body=queue_object("storm", None, -1))
        for name in ("storm-a", "storm-b"):
            await driver_api.request("POST", QUEUES, body=queue_object(name, "storm", gpus / 2))
        await _create_jobs(driver_api, "storm-a", "storm-a", gpus, preemptible=True)
        if await _wait_until(driver_api, "storm-a", gpus, timeout) is None:
            raise SystemExit(f"storm-a never filled the cluster's {gpus} GPUs")
        recording[0] = True
        started = time.monotonic()
        await _create_jobs(driver_api, "storm-b", "storm-b", gpus, preemptible=False)
        created = time.monotonic() - started
        waited = await _wait_until(driver_api, "storm-b", gpus // 2, timeout)
        recording[0] = False
    to_share = None if waited is None else created + waited
    return StormReport(nodes, gpus, gpus, to_share, created, sessions, evictions[0], config.sessionTimeBudget or 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--period", type=float, default=1.0, help="seconds between scheduling cycles")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each phase")
    args = parser.parse_args()
    report = asyncio.run(run(args.nodes, args.period, args.timeout))
    print(report.text())
    held = report.longest <= report.budget + BUDGET_SLACK
    return 0 if held and report.seconds_to_share is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
