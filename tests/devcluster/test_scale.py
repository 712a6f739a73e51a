"""The dev cluster at the size kai-ray is driven with: 1,000 nodes, 5,000 pods, ten watchers.

Budgets are loose (several times what this machine needs) so the test catches a per-request
cost that grows with the cluster, not a slow CI host.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from devcluster import DevCluster
from devcluster.pods import bind
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.devcluster.conftest import ON_TEST_LOOP, eventually, pod

pytestmark = ON_TEST_LOOP


async def test_a_thousand_nodes_five_thousand_pods_and_ten_watchers() -> None:
    started = time.perf_counter()
    cluster = DevCluster(nodes=synthetic_nodes(1000), start_delay=0.05, max_grace=0.1)
    for i in range(5000):
        manifest = pod(f"p{i}")
        # Bound below without a scheduler, five to a node: CPU-only, so no node runs out of GPUs
        # (the simulated kubelet refuses a pod its node has no free devices for).
        manifest["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
        cluster.create("", "v1", "pods", manifest, "default")
    assert time.perf_counter() - started < 5
    url = await cluster.start()
    counts = [0] * 10
    try:
        async with aiohttp.ClientSession() as session:
            version = cluster.resource_version

            async def watch(i: int) -> None:
                async with session.get(f"{url}/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds=30") as r:
                    async for _ in r.content:
                        counts[i] += 1

            watchers = [asyncio.create_task(watch(i)) for i in range(10)]
            await eventually(lambda: cluster.store.watcher_count() == 10)

            started = time.perf_counter()
            items, token = 0, ""
            while True:
                query = f"limit=500&continue={token}" if token else "limit=500"
                async with session.get(f"{url}/api/v1/pods?{query}") as r:
                    page = orjson.loads(await r.read())
                items += len(page["items"])
                token = page["metadata"].get("continue", "")
                if not token:
                    break
            assert items == 5000 and time.perf_counter() - started < 3

            started = time.perf_counter()
            pods = cluster.resource("", "v1", "pods")
            for i in range(5000):  # the binder's work, minus HTTP
                bind(cluster.registry, pods, "default", f"p{i}", {"target": {"name": f"kwok-node-{i % 1000}"}})
            await eventually(lambda: cluster.simulator is not None and cluster.simulator.started == 5000, timeout=10)
            assert time.perf_counter() - started < 10
            await eventually(lambda: set(counts) == {10_000}, timeout=10)  # bound, then running, for every watcher
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
    finally:
        await cluster.stop()
