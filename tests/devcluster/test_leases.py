"""Leader election (kubernetes-asyncio's LeaseLock, through the adapter) on the dev cluster's Leases."""

from __future__ import annotations

import asyncio

from k8s_adapter.leader import Leadership
from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually

pytestmark = ON_TEST_LOOP


async def test_one_replica_leads_and_a_standby_takes_over(kube: Kube) -> None:
    # kubernetes-asyncio insists on a retry period and renew deadline of at least 1 s, hence the seconds here.
    replicas = [Leadership(enabled=True, lease_duration=2) for _ in range(2)]
    tasks = [
        asyncio.create_task(r.campaign(kube.api, "kai-ray", "default", renew_deadline=1.5, retry_period=1.0))
        for r in replicas
    ]
    try:
        await eventually(lambda: sum(r.is_leader() for r in replicas) == 1)
        await asyncio.sleep(0.5)  # renewals go on; the standby stays a standby
        assert sum(r.is_leader() for r in replicas) == 1
        leader = next(i for i, r in enumerate(replicas) if r.is_leader())
        lease = kube.cluster.get("coordination.k8s.io", "v1", "leases", "kai-ray", "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == replicas[leader].identity
        tasks[leader].cancel()  # the leader dies without releasing the lease
        standby = replicas[1 - leader]
        await eventually(standby.is_leader, timeout=5)
        lease = kube.cluster.get("coordination.k8s.io", "v1", "leases", "kai-ray", "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == standby.identity
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
