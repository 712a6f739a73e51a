"""A cycle that stops at its time budget with a victim search under way: the loop starts the next
cycle at once rather than a period later, so a gang's search spread over cycles still ends."""

from __future__ import annotations

from pathlib import Path

from devcluster import DevCluster
from k8s_adapter.api import connect
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.metrics import new_registry
from k8s_adapter.runner import SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.app.sim.cluster import SHAPES, kwok_node
from kai_ray.config import SchedulerConfig
from tests.adapter.conftest import pod, pod_group, queue, running, until

NODES = 6
PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"


async def test_a_gang_search_stopped_at_the_budget_goes_on_without_waiting_a_period(tmp_path: Path) -> None:
    eight_gpus = SHAPES[0]
    cluster = DevCluster(
        nodes=[kwok_node(f"n{i}", eight_gpus, i) for i in range(NODES)], start_delay=0.05, max_grace=0.2
    )
    await cluster.start()
    api = await connect(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        await api.request("POST", QUEUES, body=queue("q1", gpu_quota=0))
        await api.request("POST", QUEUES, body=queue("q2", gpu_quota=8 * NODES))
        for i in range(NODES):  # every node full with one of q1's whole-node pods
            await api.request("POST", GROUPS, body=pod_group(f"hog{i}", "q1", 1))
            hog = pod(f"hog{i}", gpus=8, group=f"hog{i}", queue_name="q1")
            hog["spec"]["nodeName"] = f"n{i}"
            await api.request("POST", PODS, body=hog)
        await api.request("POST", GROUPS, body=pod_group("gang", "q2", NODES))
        for i in range(NODES):
            await api.request("POST", PODS, body=pod(f"gang-{i}", gpus=8, group="gang", queue_name="q2"))
        # Spent before any search starts: each cycle takes one step of the gang's search.
        config = SchedulerConfig.model_validate({"kValue": 0, "sessionTimeBudget": 1e-9})
        loop = SchedulerLoop(
            api,
            ClusterCache(),
            lambda _: in_process_coordinator(config),
            new_registry(),
            Leadership(enabled=False),
            period=3600.0,  # were the loop to wait a period between the steps, it would wait hours
        )
        async with running(loop):
            await until(lambda: loop.state.evictions >= NODES, timeout=60)
        assert loop.state.cycles >= NODES  # one step a cycle, none of them a period apart
    finally:
        await api.close()
        await cluster.stop()
