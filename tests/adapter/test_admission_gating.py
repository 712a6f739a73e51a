"""kai-ray's queue-admission gate through the live loop and the dev cluster: removed by a PATCH
when the queue has room, kept (with no Unschedulable condition for autoscalers) while it has
none; another owner's gate is never touched and its pod never bound."""

from __future__ import annotations

from typing import Any

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
