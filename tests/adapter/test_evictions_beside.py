"""Evictions go out beside the next cycles: the loop keeps deciding while the API server is slow to
take them, and the cycles after see the victims leaving, so they evict nothing more for them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from coordinator.coordinator import Coordinator
from devcluster.faults import FaultRule
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from kai_ray.model import PodState
from tests.adapter.conftest import dev_env, pod, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
SLOW = 1.5  # seconds the API server takes to answer an eviction


async def test_slow_evictions_hold_no_cycle_and_no_cycle_evicts_again(tmp_path: Path) -> None:
    decided: list[str] = []  # every eviction any cycle decided, in order
    cycles_at: list[float] = []  # when each cycle ended

    def coordinator(_: int) -> Coordinator:
        made = in_process_coordinator(SchedulerConfig.model_validate({"kValue": 0}))
        cycle = made.cycle

        def counted(now: float, actions: Any = None) -> Any:
            result = cycle(now, actions)
            decided.extend(e.pod for e in result.evictions)
            cycles_at.append(time.monotonic())
            return result

        made.cycle = counted  # type: ignore[method-assign]
        return made

    rule = FaultRule("create", "pods", "eviction", code=0, times=None, delay=SLOW)
    async with dev_env(tmp_path, 1) as env:  # one node of 8 GPUs
        await env.create(QUEUES, queue("team-a", gpu_quota=4))
        await env.create(QUEUES, queue("team-b", gpu_quota=4))
        for i in range(8):
            await env.create(PODS, pod(f"a-{i}", queue_name="team-a"))
        loop = SchedulerLoop(
            env.api, ClusterCache(), coordinator, CollectorRegistry(), Leadership(enabled=False), period=0.05
        )
        async with running(loop):
            await until(lambda: len([p for p in loop.cache.pods.values() if p.state is PodState.RUNNING]) == 8)
            env.cluster.faults.add(rule)
            for i in range(4):
                await env.create(PODS, pod(f"b-{i}", queue_name="team-b"))
            await until(lambda: rule.hits > 0)
            sent = time.monotonic()  # within a poll (0.05 s) of the first eviction reaching the server
            await until(lambda: all(env.node_of(f"b-{i}") for i in range(4)), timeout=20)
    # Reclaim took team-b's quota of 4 from team-a: four evictions, decided once each.
    assert len(decided) == 4 and len(set(decided)) == 4, decided
    assert all(name.startswith("default/a-") for name in decided)
    # While the API server sat on the evictions, cycles went on (period 0.05 s, evictions 1.5 s).
    assert len([at for at in cycles_at if sent < at < sent + SLOW - 0.5]) >= 3
