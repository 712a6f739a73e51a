"""kai-ray's queue-admission gate through the live loop and the dev cluster: removed by a PATCH
when the queue has room, kept (with no Unschedulable condition for autoscalers) while it has
none; another owner's gate is never touched and its pod never bound."""

from __future__ import annotations

from typing import Any

from k8s_adapter import kinds
from k8s_adapter.cache import ClusterCache
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from tests import manifests as m
from tests.adapter.conftest import Env, pod, pod_group, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
GATE = "kai.scheduler/queue-admission"


def gated(name: str, gpus: int, *gates: str) -> dict[str, Any]:
    manifest = pod(name, gpus, group=name)
    manifest["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return manifest


def stored(env: Env, name: str) -> dict[str, Any]:
    return env.cluster.get("", "v1", "pods", name, "default")


def scheduled(env: Env, name: str) -> tuple[str, str] | None:
    found = [c for c in stored(env, name)["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
    return (found[0]["status"], found[0].get("reason", "")) if found else None


async def test_the_gate_goes_when_the_queue_has_room_and_stays_while_it_has_none(env: Env) -> None:
    await env.create(QUEUES, queue("q", gpu_limit=2))
    for name in ("first", "second", "foreign"):
        await env.create(GROUPS, pod_group(name, "q", 1))
    await env.create(PODS, gated("first", 2, GATE))
    await env.create(PODS, gated("second", 2, GATE))
    await env.create(PODS, gated("foreign", 0, "example.com/wait"))
    loop = env.loop()
    async with running(loop):
        await until(lambda: stored(env, "first")["spec"].get("nodeName"), timeout=20)
        assert "schedulingGates" not in stored(env, "first")["spec"]
        assert stored(env, "first")["metadata"]["annotations"]["kai.scheduler/queue-admitted-timestamp"].endswith("Z")
        await env.create(GROUPS, pod_group("plain", "q", 1))
        await env.create(PODS, pod("plain", 1, group="plain"))  # ungated, over the limit too
        # Past the status writer's delay before it reports a pending pod (2 s): the ungated pod is
        # Unschedulable to an autoscaler, the gated ones are not.
        await until(lambda: scheduled(env, "plain") == ("False", "Unschedulable"), timeout=20)
        assert [g["name"] for g in stored(env, "second")["spec"]["schedulingGates"]] == [GATE]
        assert scheduled(env, "second") == ("False", "SchedulingGated")  # never Unschedulable
        assert stored(env, "foreign")["spec"]["schedulingGates"] == [{"name": "example.com/wait"}]
        assert not stored(env, "foreign")["spec"].get("nodeName")
        for name in ("first", "plain"):
            await env.api.request("DELETE", f"{PODS}/{name}", query={"gracePeriodSeconds": 0})
        await until(lambda: stored(env, "second")["spec"].get("nodeName"), timeout=20)
        assert loop.ungates.removed == 2 and loop.ungates.failed == 0


def no_gpu_quota(name: str, gpu_limit: int = -1) -> dict[str, Any]:
    spec = queue(name, gpu_limit=gpu_limit)
    spec["spec"]["resources"]["gpu"]["quota"] = 0
    return spec


def test_the_watch_cache_carries_gated_pods_into_the_fair_share() -> None:
    """The live path: pods as the watches list them (no PodGroup of their own: the cache groups
    them), through the cache's deltas into the coordinator. ``a``'s 6 gated GPUs count in its
    request as if pending, so the 8 GPUs divide 4 and 4 (2 and 6 with only its running 2)."""
    cache = ClusterCache()
    cache.on_list(kinds.NODES, [m.node("n1", gpu=8)])
    cache.on_list(kinds.QUEUES, [no_gpu_quota("a", gpu_limit=6), no_gpu_quota("b")])
    backlog = [m.pod(f"backlog-{i}", "a", gpu=1, gates=(GATE,)) for i in range(6)]
    running = [
        m.pod("a-run", "a", gpu=2, node_name="n1", phase="Running"),
        m.pod("b-run", "b", gpu=6, node_name="n1", phase="Running"),
    ]
    cache.on_list(kinds.PODS, [*backlog, *running, m.pod("b-more", "b", gpu=2)])
    coordinator = in_process_coordinator(SchedulerConfig.model_validate({"kValue": 0}))
    coordinator.apply(cache.take_deltas())
    result = coordinator.cycle(1_000.0)
    assert {q: figures["fairShare"]["gpu"] for q, figures in result.decisions.queues.items()} == {"a": 4, "b": 4}
    assert not result.binds and not result.evictions  # gated pods are neither placed nor reclaimed for
    assert sum(result.gated_by_queue.values()) == 6
