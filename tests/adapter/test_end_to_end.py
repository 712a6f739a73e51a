"""The adapter against the dev cluster over real HTTP, with injected faults (tests/e2e runs the
rest of the adapter's end-to-end tests against the dev cluster and the real control plane)."""

from __future__ import annotations

import asyncio

import pytest

from k8s_adapter.runner import SchedulerLoop
from tests.adapter.conftest import Env, pod, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
GROUPS = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups"


async def nodes_of(env: Env) -> dict[str, str | None]:
    """Read straight from the store, so the test's own reads never meet injected faults."""
    items = env.cluster.objects("", "v1", "pods", "default")
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in items}


async def _all_bound(env: Env, names: list[str]) -> bool:
    placed = await nodes_of(env)
    return all(placed.get(n) for n in names)


async def test_faults_lose_no_pod_and_bind_none_twice(env: Env) -> None:
    await env.create(QUEUES, queue("q"))
    faults = env.cluster.faults
    faults.fail("create", "pods", 409, subresource="binding", times=1)
    faults.fail("create", "pods", 500, subresource="binding", times=3)
    faults.fail("list", "pods", 500, times=2)
    loop = env.loop()
    async with running(loop):
        for i in range(6):
            await env.create(PODS, pod(f"job-{i}", gpus=1, queue_name="q"))
            if i == 2:
                env.cluster.drop_watches(abrupt=False)
            if i == 4:
                env.cluster.expire_history()
                env.cluster.drop_watches(abrupt=False)
        await until(lambda: _all_bound(env, [f"job-{i}" for i in range(6)]), timeout=20)
        gone = sum(r.stats.gone for r in loop.reflectors)
    assert gone >= 1  # at least one watch had to list again after the history expired
    placed = await nodes_of(env)
    assert len(placed) == 6 and all(placed.values())
    assert env.cluster.faults.injected == 6  # every injected failure was met and survived


async def test_kubectl_sees_what_the_scheduler_did(env: Env) -> None:
    import shutil
    import subprocess

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    await env.create(QUEUES, queue("q"))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(env.kubeconfig), *args], capture_output=True, text=True, timeout=30
        )

    manifest = env.kubeconfig.parent / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: demo, labels: {kai.scheduler/queue: q}}\n"
        "spec:\n  schedulerName: kai-scheduler\n  containers: [{name: c, image: x, resources: "
        "{limits: {nvidia.com/gpu: '1'}}}]\n"
    )
    created = await asyncio.to_thread(kubectl, "create", "-f", str(manifest))
    assert created.returncode == 0, created.stderr
    async with running(env.loop()):
        await until(lambda: _all_bound(env, ["demo"]))
    shown = await asyncio.to_thread(kubectl, "get", "pods", "-o", "wide")  # the NODE column is a wide one
    assert "demo" in shown.stdout and "kwok-node" in shown.stdout
    assert (await asyncio.to_thread(kubectl, "delete", "pod", "demo")).returncode == 0


async def test_a_stop_drops_binds_still_unanswered_after_the_grace_and_ends(
    env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import time

    from k8s_adapter import runner

    caplog.set_level(logging.INFO, logger="k8s_adapter.runner")
    monkeypatch.setattr(runner, "SHUTDOWN_GRACE_SECONDS", 0.3)
    await env.create(QUEUES, queue("q"))
    await env.create(PODS, pod("slow", gpus=1, queue_name="q"))
    env.cluster.faults.delay(30, "create", "pods")  # the bind is sent and never answered in time
    loop = env.loop()
    task = asyncio.create_task(loop.run())
    await until(lambda: _sent(loop), timeout=10)  # the bind is in flight
    stopped = time.monotonic()
    loop.stop()
    await asyncio.wait_for(task, 10)
    assert time.monotonic() - stopped < 5  # the grace, not the bind's 30 s
    assert "API writes still going dropped" in caplog.text
    assert not loop.steps.in_flight  # nothing is left to write through the client once it closes
    assert (await nodes_of(env))["slow"] is None


async def _sent(loop: SchedulerLoop) -> bool:
    return bool(loop.steps.in_flight)
