"""Two replicas: exactly one schedules; when it stops, the other takes over within the lease."""

from __future__ import annotations

import asyncio

from k8s_adapter.api import connect
from k8s_adapter.leader import Leadership
from tests.adapter.conftest import Env, pod, queue, until

PODS = "/api/v1/namespaces/default/pods"


async def test_one_leader_binds_and_a_standby_takes_over(env: Env) -> None:
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("q"))
    second_api = await connect(str(env.kubeconfig))
    leaders = [Leadership(enabled=True, lease_duration=3), Leadership(enabled=True, lease_duration=3)]
    loops = [env.loop(leadership=leaders[0]), env.loop(leadership=leaders[1], own_registry=True)]
    loops[1].api = second_api
    for loop in loops:
        loop.binder.api = loop.evictor.api = loop.status.api = loop.grouper.api = loop.api
    elections = [
        asyncio.create_task(
            leaders[i].campaign(loops[i].api.client, "kai-ray", "default", renew_deadline=2.0, retry_period=1.0)
        )
        for i in range(2)
    ]
    runs = [asyncio.create_task(loop.run()) for loop in loops]
    try:
        await until(lambda: any(leader.is_leader() for leader in leaders), timeout=10)
        await asyncio.sleep(1.0)
        assert sum(leader.is_leader() for leader in leaders) == 1
        first = 0 if leaders[0].is_leader() else 1
        await env.create(PODS, pod("before", gpus=1, queue_name="q"))
        await until(lambda: loops[first].state.binds == 1, timeout=10)
        assert loops[1 - first].state.binds == 0  # the standby never binds

        elections[first].cancel()  # the leader goes away (its lease is no longer renewed)
        runs[first].cancel()
        started = asyncio.get_running_loop().time()
        await until(lambda: leaders[1 - first].is_leader(), timeout=15)
        assert asyncio.get_running_loop().time() - started < 15
        await env.create(PODS, pod("after", gpus=1, queue_name="q"))
        await until(lambda: loops[1 - first].state.binds == 1, timeout=10)
    finally:
        for task in [*elections, *runs]:
            task.cancel()
        await asyncio.gather(*elections, *runs, return_exceptions=True)
        await second_api.close()
