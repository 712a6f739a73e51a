"""Leader election on a coordination.k8s.io Lease, against both clusters: one of two replicas
binds; when it stops renewing, the other takes the Lease over and binds."""

from __future__ import annotations

import asyncio

from k8s_adapter.api import connect
from k8s_adapter.leader import Leadership
from tests.adapter.conftest import pod, queue
from tests.e2e.backends import LEASES, PODS, QUEUES, Backend, until_true


async def test_one_leader_binds_and_a_standby_takes_over(cluster: Backend) -> None:
    await cluster.create(QUEUES, queue("q"))
    second_api = await connect(str(cluster.kubeconfig))
    leaders = [Leadership(enabled=True, lease_duration=3), Leadership(enabled=True, lease_duration=3)]
    loops = [
        cluster.loop(leadership=leaders[0]),
        cluster.loop(leadership=leaders[1], own_registry=True, api=second_api),
    ]
    elections = [
        asyncio.create_task(
            leaders[i].campaign(loops[i].api.client, "kai-ray", "default", renew_deadline=2.0, retry_period=1.0)
        )
        for i in range(2)
    ]
    runs = [asyncio.create_task(loop.run()) for loop in loops]
    try:
        await until_true(lambda: any(leader.is_leader() for leader in leaders), timeout=20)
        await asyncio.sleep(1.0)
        assert sum(leader.is_leader() for leader in leaders) == 1
        first = 0 if leaders[0].is_leader() else 1
        lease = await cluster.get(f"{LEASES}/kai-ray")
        assert lease["spec"]["holderIdentity"] == leaders[first].identity
        assert lease["spec"]["leaseDurationSeconds"] == 3

        await cluster.create(PODS, pod("before", gpus=1, queue_name="q"))
        await until_true(lambda: loops[first].state.binds == 1, timeout=20)
        assert loops[1 - first].state.binds == 0  # the standby never binds

        elections[first].cancel()  # the leader goes away (its lease is no longer renewed)
        runs[first].cancel()
        started = asyncio.get_running_loop().time()
        await until_true(lambda: leaders[1 - first].is_leader(), timeout=20)
        assert asyncio.get_running_loop().time() - started < 20
        lease = await cluster.get(f"{LEASES}/kai-ray")
        assert lease["spec"]["holderIdentity"] == leaders[1 - first].identity
        await cluster.create(PODS, pod("after", gpus=1, queue_name="q"))
        await until_true(lambda: loops[1 - first].state.binds == 1, timeout=20)
    finally:
        for task in [*elections, *runs]:
            task.cancel()
        await asyncio.gather(*elections, *runs, return_exceptions=True)
        await second_api.close()
