"""The node simulator stepped by hand on a manual clock: exact timings, no waiting."""

from __future__ import annotations

from devcluster import DevCluster, ManualClock
from kai_ray.app.sim.cluster import SHAPES, synthetic_nodes
from tests.devcluster.conftest import pod


def setup() -> tuple[DevCluster, ManualClock]:
    clock = ManualClock()
    return DevCluster(nodes=synthetic_nodes(2), clock=clock, start_delay=1.0, max_grace=5.0), clock


def phase(cluster: DevCluster, name: str) -> str | None:
    found = cluster.get("", "v1", "pods", name, "default")
    return None if found is None else found["status"]["phase"]


def test_start_run_and_finish_happen_exactly_when_due() -> None:
    cluster, clock = setup()
    sim = cluster.simulator
    assert sim is not None
    cluster.create("", "v1", "pods", pod("a", node="kwok-node-0", **{"kai-ray.dev/run-seconds": "10"}), "default")
    clock.advance(0.99)
    assert sim.step() == 0 and phase(cluster, "a") == "Pending"
    clock.advance(0.01)
    assert sim.step() == 1 and phase(cluster, "a") == "Running"
    assert cluster.get("", "v1", "pods", "a", "default")["status"]["startTime"] == clock.timestamp()
    clock.advance(9.99)
    assert sim.step() == 0 and phase(cluster, "a") == "Running"
    clock.advance(0.01)
    assert sim.step() == 1 and phase(cluster, "a") == "Succeeded"
    cluster.delete("", "v1", "pods", "a", "default")
    assert phase(cluster, "a") is None  # a finished pod needs no grace


def test_terminating_pods_go_after_the_grace_period_capped() -> None:
    cluster, clock = setup()
    sim = cluster.simulator
    assert sim is not None
    for name, grace in (("short", 2), ("long", 30)):
        cluster.create("", "v1", "pods", pod(name, node="kwok-node-1"), "default")
        clock.advance(1)
        sim.step()
        cluster.delete("", "v1", "pods", name, "default", grace_seconds=grace)
    # Now t=2; "short" was deleted at t=1 (due t=3), "long" at t=2 (30 s capped to 5: due t=7).
    clock.advance(0.99)
    assert sim.step() == 0
    clock.advance(0.01)
    assert sim.step() == 1 and phase(cluster, "short") is None
    clock.advance(3.99)
    assert sim.step() == 0 and phase(cluster, "long") == "Running"
    clock.advance(0.01)
    assert sim.step() == 1 and phase(cluster, "long") is None


def test_a_timer_for_a_pod_that_moved_on_does_nothing() -> None:
    cluster, clock = setup()
    sim = cluster.simulator
    assert sim is not None
    cluster.create("", "v1", "pods", pod("a", node="kwok-node-0"), "default")
    cluster.delete("", "v1", "pods", "a", "default", grace_seconds=0)
    cluster.create("", "v1", "pods", pod("a"), "default")  # same name, new uid, unbound
    clock.advance(2)
    assert sim.step() == 0 and phase(cluster, "a") == "Pending"


def test_synthetic_nodes_mix_and_labels() -> None:
    nodes = synthetic_nodes(20, taint=True)
    gpus = [int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in nodes]
    assert gpus.count(8) == 10 and gpus.count(4) == 6 and gpus.count(0) == 4
    eight = nodes[0]
    assert eight["metadata"]["labels"]["nvidia.com/gpu.memory"] == str(SHAPES[0].gpu_memory_mib) == "81920"
    assert eight["metadata"]["labels"]["type"] == "kwok"
    assert eight["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert eight["spec"]["taints"] == [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    racks = {n["metadata"]["labels"]["kai-ray.dev/rack"] for n in nodes}
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    assert racks == {"rack-0", "rack-1", "rack-2"} and zones == {"zone-a", "zone-b", "zone-c"}
    assert "taints" not in synthetic_nodes(1)[0]["spec"]
