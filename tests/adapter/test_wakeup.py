"""The loop does not sit out its period when the watch brings work: a pod arriving is decided
at once, and a reclaim binds onto the GPUs freed as soon as its victim is gone."""

from __future__ import annotations

from pathlib import Path

from tests.adapter.conftest import dev_env, pod, queue, running, until

PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.run.ai/v2/queues"
PERIOD = 30.0  # far longer than either test may take: only a wake can decide in time


async def test_a_pod_that_arrives_is_bound_without_waiting_for_the_period(tmp_path: Path) -> None:
    async with dev_env(tmp_path, 1) as env:
        await env.create(QUEUES, queue("q"))
        async with running(env.loop(period=PERIOD)) as loop:
            await until(lambda: loop.state.cycles >= 1)
            await env.create(PODS, pod("late", queue_name="q"))
            await until(lambda: env.node_of("late"), timeout=PERIOD / 3)


async def test_a_reclaim_binds_once_its_victim_is_gone_without_waiting_for_the_period(tmp_path: Path) -> None:
    async with dev_env(tmp_path, 1) as env:  # one node of 8 GPUs
        await env.create(QUEUES, queue("team-a", gpu_quota=0))
        await env.create(QUEUES, queue("team-b", gpu_quota=8))
        await env.create(PODS, pod("victim", gpus=8, queue_name="team-a"))
        async with running(env.loop(period=PERIOD)):
            await until(lambda: env.node_of("victim"), timeout=PERIOD / 3)
            await env.create(PODS, pod("reclaimer", gpus=8, queue_name="team-b"))
            # Two cycles: one evicts, the next binds onto the freed GPUs.
            await until(lambda: env.node_of("reclaimer"), timeout=PERIOD / 3)
