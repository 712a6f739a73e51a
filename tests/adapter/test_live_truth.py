"""The live loop keeps the truth, end to end against the dev cluster over HTTP:
finished pods give their GPUs back, nothing is over-committed however the cluster gets there,
an eviction is not sent once the reason for it is gone, a pod whose bind keeps failing is
backed off and its gang goes stale, and one bad object blocks nobody."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from k8s_adapter.binder import BindBackoff
from k8s_adapter.cache import ClusterCache
from k8s_adapter.leader import Leadership
from k8s_adapter.runner import SchedulerLoop
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from tests.adapter.conftest import Env, budget, dev_env, pod, pod_group, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"
NODE = "kwok-node-0"


@pytest.fixture
async def one_node(tmp_path: Path) -> AsyncIterator[Env]:
    """One node with 8 GPUs: any GPU counted twice or not at all shows at once."""
    async with dev_env(tmp_path, 1) as made:
        yield made


def make_loop(env: Env, **config: Any) -> SchedulerLoop:
    settings = SchedulerConfig.model_validate({"kValue": 0, **config})
    return SchedulerLoop(
        env.api,
        ClusterCache(),
        lambda _: in_process_coordinator(settings),
        CollectorRegistry(),
        Leadership(enabled=False),
        period=0.05,
        bind_backoff=BindBackoff(base=0.3, limit=5.0),
    )


def stored(env: Env, name: str) -> dict[str, Any] | None:
    return env.cluster.get("", "v1", "pods", name, "default")


def node_of(env: Env, name: str) -> str | None:
    found = stored(env, name)
    return None if found is None else (found.get("spec") or {}).get("nodeName")


def phase(env: Env, name: str) -> str | None:
    found = stored(env, name)
    return None if found is None else (found.get("status") or {}).get("phase")


def place(env: Env, manifest: dict[str, Any], node: str = NODE) -> None:
    """A pod bound by someone else (another scheduler, or kai-ray before a restart)."""
    manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": "default"}}
    manifest["spec"] = {**manifest["spec"], "nodeName": node}
    env.cluster.create("", "v1", "pods", manifest)


def events_about(env: Env, name: str) -> list[dict[str, Any]]:
    """The events saying ``name`` is malformed (others, such as Scheduled, left out)."""
    return [
        e
        for e in env.cluster.objects("", "v1", "events", "default")
        if e["involvedObject"]["name"] == name and e["reason"] in ("ObjectWarning", "InvalidObject")
    ]


async def stays_pending(env: Env, name: str, cycles: int = 15) -> bool:
    """Still unbound after the scheduler had ``cycles`` chances (a cycle every 0.05 s)."""
    await asyncio.sleep(0.05 * cycles)
    return node_of(env, name) is None


@pytest.mark.parametrize("exit_code", ["0", "1"])
async def test_a_finished_pod_gives_its_gpus_back(one_node: Env, exit_code: str) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    first = pod(
        "first", gpus=8, queue_name="q", **{"kai-ray.dev/run-seconds": "0.3", "kai-ray.dev/exit-code": exit_code}
    )
    await env.create(PODS, first)
    async with running(make_loop(env)):
        await until(lambda: phase(env, "first") in ("Succeeded", "Failed"))
        await env.create(PODS, pod("second", gpus=8, queue_name="q"))
        await until(lambda: node_of(env, "second") == NODE, timeout=5)


async def test_a_node_that_registers_again_keeps_its_pods_counted(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    await env.create(PODS, pod("first", gpus=8, queue_name="q"))
    async with running(make_loop(env)) as loop:
        await until(lambda: phase(env, "first") == "Running")
        node = env.cluster.get("", "v1", "nodes", NODE)
        assert node is not None
        env.cluster.delete("", "v1", "nodes", NODE)
        await until(lambda: NODE not in loop.cache.nodes)
        env.cluster.create(
            "",
            "v1",
            "nodes",
            {k: v for k, v in node.items() if k != "metadata"}
            | {"metadata": {"name": NODE, "labels": node["metadata"]["labels"]}},
        )
        await until(lambda: NODE in loop.cache.nodes)
        await env.create(PODS, pod("second", gpus=8, queue_name="q"))
        assert await stays_pending(env, "second")  # 16 GPUs on an 8-GPU node before the fix


async def test_another_schedulers_pod_with_a_stray_fraction_annotation_is_counted(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    foreign = pod("foreign", gpus=8, **{"gpu-fraction": "0.5"})
    foreign["spec"]["schedulerName"] = "default-scheduler"
    place(env, foreign)
    await until(lambda: phase(env, "foreign") == "Running")
    await env.create(PODS, pod("ours", gpus=8, queue_name="q"))
    async with running(make_loop(env)):
        assert await stays_pending(env, "ours")
        await until(lambda: bool(events_about(env, "foreign")))
    [event] = events_about(env, "foreign")
    assert event["type"] == "Warning" and event["reason"] == "ObjectWarning"
    assert "Pod default/foreign: metadata.annotations" in event["message"]
    assert "its 8 whole GPUs are counted" in event["message"]


async def test_a_running_pod_reannotated_with_garbage_stays_counted_after_a_restart(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    await env.create(PODS, pod("shared", gpus=0, queue_name="q", **{"gpu-fraction": "0.5"}))
    async with running(make_loop(env)):
        await until(lambda: phase(env, "shared") == "Running")
    env.cluster.patch("", "v1", "pods", "shared", {"metadata": {"annotations": {"gpu-fraction": "abc"}}}, "default")
    await env.create(PODS, pod("whole", gpus=8, queue_name="q"))
    async with running(make_loop(env)):  # a restarted scheduler: it learns the pod from a list
        assert await stays_pending(env, "whole")  # the shared GPU is taken: 7 whole GPUs are left
        await until(lambda: bool(events_about(env, "shared")))
    [event] = events_about(env, "shared")
    assert "metadata.annotations.gpu-fraction: not a number: 'abc'" in event["message"]
    assert "counted as 1 whole GPU" in event["message"]


async def test_a_blocked_eviction_is_not_sent_once_its_preemptor_is_gone(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("low", gpu_quota=0))
    await env.create(QUEUES, queue("high", gpu_quota=8))
    await env.create("/apis/policy/v1/namespaces/default/poddisruptionbudgets", budget("keep", "keep"))
    victim = pod("victim", gpus=8, queue_name="low")
    victim["metadata"]["labels"]["app"] = "keep"
    await env.create(PODS, victim)
    loop = make_loop(env)
    loop.evictor.retry_after = 0.1
    async with running(loop):
        await until(lambda: phase(env, "victim") == "Running")
        await env.create(PODS, pod("preemptor", gpus=8, queue_name="high"))
        await until(lambda: "default/victim" in loop.evictor.waiting)  # reclaim chose it; the budget said no
        await env.api.request("DELETE", f"{PODS}/preemptor")
        await until(lambda: stored(env, "preemptor") is None)
        spare = pod("spare", gpus=0)  # a second healthy pod: now the budget would allow one eviction
        spare["metadata"]["labels"]["app"] = "keep"
        spare["spec"]["schedulerName"] = "default-scheduler"
        place(env, spare)
        await until(lambda: phase(env, "spare") == "Running")
        await until(lambda: "default/victim" not in loop.evictor.waiting)
        await asyncio.sleep(0.5)
    victim_now = stored(env, "victim")
    assert victim_now is not None and not victim_now["metadata"].get("deletionTimestamp")  # not evicted for nothing


async def test_a_pod_whose_bind_keeps_failing_is_backed_off_and_its_gang_goes_stale(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    await env.create(GROUPS, pod_group("gang", "q", 4))
    for i in range(4):
        await env.create(PODS, pod(f"gang-{i}", gpus=2, group="gang"))
    env.cluster.faults.fail("create", "pods", 500, subresource="binding", times=None, name="gang-3")
    loop = make_loop(env, defaultStalenessGracePeriod="3s")
    loop.status.report_after = 0.0
    conditions: list[str] = []

    def condition() -> str:
        group = env.cluster.get("scheduling.run.ai", "v2alpha2", "podgroups", "gang", "default") or {}
        found = (group.get("status") or {}).get("schedulingConditions") or []
        return found[0]["reasons"][0]["message"] if found else ""

    async with running(loop):
        await until(lambda: all(node_of(env, f"gang-{i}") for i in range(3)))
        await until(lambda: "could not be bound" in (text := condition()) and not conditions.append(text), timeout=10)
        # Stale for longer than its grace period while the failing pod waits: the gang is evicted
        # (KAI's stale-gang rule), not left three of four bound forever.
        await until(lambda: all(stored(env, f"gang-{i}") is None for i in range(3)), timeout=20)
        attempts = loop.bind_backoff.failures["default/gang-3"].count
    assert "pod default/gang-3 could not be bound" in conditions[0] and "500" in conditions[0]
    assert 2 <= attempts <= 8  # retried, but backed off: not once per 0.05 s cycle


async def test_malformed_objects_are_named_in_events_and_conditions_and_block_nobody(one_node: Env) -> None:
    env = one_node
    await env.create(QUEUES, queue("q"))
    bad_queue = queue("broken")
    bad_queue["spec"]["resources"]["gpu"]["quota"] = -5  # a number, so the schema takes it; KAI's rules do not
    await env.create(QUEUES, bad_queue)
    await env.create(GROUPS, pod_group("bad-pod", "q", 1))
    await env.create(PODS, pod("bad-pod-0", gpus=0, group="bad-pod", **{"gpu-memory": "abc"}))
    late = pod_group("bad-group", "q", 1)
    late["spec"]["stalenessGracePeriod"] = "soon"
    await env.create(GROUPS, late)
    await env.create(PODS, pod("bad-group-0", gpus=1, group="bad-group"))
    await env.create(GROUPS, pod_group("in-broken", "broken", 1))
    await env.create(PODS, pod("in-broken-0", gpus=1, group="in-broken"))
    await env.create(PODS, pod("fine", gpus=1, queue_name="q"))
    loop = make_loop(env)
    loop.status.report_after = 0.0

    def reason(group: str) -> str:
        found = env.cluster.get("scheduling.run.ai", "v2alpha2", "podgroups", group, "default") or {}
        conditions = (found.get("status") or {}).get("schedulingConditions") or []
        return conditions[0]["reasons"][0]["message"] if conditions else ""

    async with running(loop):
        await until(lambda: node_of(env, "fine") == NODE)  # the good pod is not held up by the bad ones
        await until(lambda: all(reason(g) for g in ("bad-pod", "bad-group", "in-broken")), timeout=10)
        await until(lambda: all(events_about(env, n) for n in ("bad-pod-0", "bad-group", "broken")), timeout=10)
    assert reason("bad-pod").startswith("Pod default/bad-pod-0: metadata.annotations.gpu-memory: not a number: 'abc'")
    assert "the PodGroup has no pods yet" not in reason("bad-pod")
    assert reason("bad-group").startswith(
        "the PodGroup is invalid: PodGroup default/bad-group: spec.stalenessGracePeriod: bad duration 'soon'"
    )
    assert reason("in-broken").startswith("queue broken is not usable: the Queue object is invalid")
    assert "spec.resources.gpu.quota: must be -1 or at least 0, got -5" in reason("in-broken")
    assert events_about(env, "bad-pod-0")[0]["reason"] == "InvalidObject"
