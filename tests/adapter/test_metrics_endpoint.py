"""/metrics during a run: names, labels and values match what the scheduler did."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from k8s_adapter.health import serve
from tests.adapter.conftest import Env, pod, queue, until


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_metrics_are_served_and_match_the_binds(env: Env) -> None:
    await env.create("/apis/scheduling.run.ai/v2/queues", queue("team", gpu_quota=2, gpu_limit=2))
    for i in range(3):
        await env.create("/api/v1/namespaces/default/pods", pod(f"p{i}", gpus=1, queue_name="team"))
    loop = env.loop()
    port = _free_port()
    server = await serve(env.registry, port, lambda: True, lambda: loop.state.synced, "127.0.0.1")
    task = asyncio.create_task(loop.run())
    try:
        await until(lambda: loop.state.binds == 2, timeout=10)
        await asyncio.sleep(0.3)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                text = await response.text()
            async with session.get(f"http://127.0.0.1:{port}/readyz") as ready:
                assert ready.status == 200
    finally:
        loop.stop()
        await asyncio.wait_for(task, 10)
        await server.cleanup()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("kai_ray_binds_total", (("result", "ok"),))] == 2
    assert samples[("kai_queue_allocated_gpus", (("queue_name", "team"),))] == 2  # the limit holds
    assert samples[("kai_queue_fair_share_gpu", (("queue_name", "team"),))] == 2
    assert samples[("scheduler_pending_pods", (("queue", "team"),))] == 1
    assert samples[("scheduler_schedule_attempts_total", (("profile", "kai-scheduler"), ("result", "scheduled")))] == 2
    assert any(name == "kai_ray_cycle_duration_seconds_count" and value >= 1 for (name, _), value in samples.items())
