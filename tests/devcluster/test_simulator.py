"""The node simulator over HTTP with a fast clock: pods start, finish, fail and go away."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from devcluster import DevCluster
from kai_ray.app.sim.cluster import synthetic_nodes
from tests.devcluster.conftest import ON_TEST_LOOP, Kube, eventually, pod

pytestmark = ON_TEST_LOOP


@pytest_asyncio.fixture(loop_scope="function")
async def fast() -> AsyncIterator[DevCluster]:
    """Simulated time twenty times faster than real time."""
    cluster = DevCluster(nodes=synthetic_nodes(2), speed=20, start_delay=1, max_grace=4)
    await cluster.start()
    yield cluster
    await cluster.stop()


def phase(cluster: DevCluster, name: str) -> str | None:
    found = cluster.get("", "v1", "pods", name, "default")
    return None if found is None else found["status"]["phase"]


async def test_a_bound_pod_becomes_running_and_ready(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a", node="kwok-node-2"))
    await eventually(lambda: phase(kube.cluster, "a") == "Running")
    running = await kube.core.read_namespaced_pod("a", "default")
    conditions = {c.type: c.status for c in running.status.conditions}
    assert conditions["Ready"] == "True" and conditions["ContainersReady"] == "True"
    assert running.status.start_time and running.status.pod_ip
    assert running.status.host_ip == "10.0.0.2"  # the node's InternalIP
    assert [(c.name, c.ready, bool(c.state.running)) for c in running.status.container_statuses] == [
        ("main", True, True)
    ]


async def test_an_unbound_pod_stays_pending(kube: Kube) -> None:
    await kube.core.create_namespaced_pod("default", pod("a"))
    await kube.core.create_namespaced_pod("default", pod("b", node="kwok-node-0"))
    await eventually(lambda: phase(kube.cluster, "b") == "Running")
    assert phase(kube.cluster, "a") == "Pending"


async def test_run_seconds_completes_the_pod_on_the_fast_clock(fast: DevCluster) -> None:
    fast.create("", "v1", "pods", pod("job", node="kwok-node-0", **{"kai-ray.dev/run-seconds": "10"}), "default")
    fast.create(
        "",
        "v1",
        "pods",
        pod("bad", node="kwok-node-1", **{"kai-ray.dev/run-seconds": "10", "kai-ray.dev/exit-code": "3"}),
        "default",
    )
    await eventually(lambda: phase(fast, "job") == "Running", timeout=2)
    await eventually(lambda: phase(fast, "job") == "Succeeded", timeout=2)  # 10 simulated s = 0.5 real s
    done = fast.get("", "v1", "pods", "job", "default")
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    await eventually(lambda: phase(fast, "bad") == "Failed", timeout=2)
    failed = fast.get("", "v1", "pods", "bad", "default")
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


async def test_a_deleted_pod_disappears_after_its_capped_grace(fast: DevCluster) -> None:
    fast.create("", "v1", "pods", pod("a", node="kwok-node-0"), "default")
    await eventually(lambda: phase(fast, "a") == "Running", timeout=2)
    fast.delete("", "v1", "pods", "a", "default", grace_seconds=600)
    assert fast.get("", "v1", "pods", "a", "default")["metadata"]["deletionTimestamp"]
    await eventually(lambda: phase(fast, "a") is None, timeout=2)  # capped at 4 simulated s = 0.2 real s
    assert fast.simulator is not None and fast.simulator.removed == 1
