"""The loop when its coordinator is lost (a coordinator actor whose process died): not ready until
a cycle succeeds again, scheduling on with the replacement; and when no coordinator can be started
for a while, the loop gives up rather than hold the Lease and decide nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator.coordinator import Coordinator, CoordinatorLost, CycleResult
from kai_ray.app.runtime import in_process_coordinator
from kai_ray.config import SchedulerConfig
from tests.adapter.conftest import Env, pod, queue, running, until
from tests.adapter.test_end_to_end import PODS, QUEUES, _all_bound


class Losing:
    """A coordinator whose next ``cycle`` calls raise ``CoordinatorLost`` while ``losses`` lasts."""

    def __init__(self, replaced: bool) -> None:
        self.inner: Coordinator = in_process_coordinator(SchedulerConfig.model_validate({"kValue": 0}))
        self.replaced = replaced
        self.losses = 0

    def apply(self, deltas: Any) -> None:
        self.inner.apply(deltas)

    def bind_failed(self, pods: list[str]) -> None:
        self.inner.bind_failed(pods)

    def cycle(self, now: float) -> CycleResult:
        if self.losses:
            self.losses -= 1
            raise CoordinatorLost("the coordinator actor died (test)", replaced=self.replaced)
        return self.inner.cycle(now)


async def test_a_replaced_coordinator_is_not_ready_until_it_decides_and_binding_goes_on(env: Env) -> None:
    await env.create(QUEUES, queue("q"))
    losing = Losing(replaced=True)
    loop = env.loop()
    loop.coordinator_factory = lambda _: losing
    async with running(loop):
        await env.create(PODS, pod("before", queue_name="q"))
        await until(lambda: _all_bound(env, ["before"]))
        losing.losses = 3
        await until(lambda: not loop.coordinator_health.deciding)
        await env.create(PODS, pod("after", queue_name="q"))
        await until(lambda: _all_bound(env, ["after"]))
        assert loop.coordinator_health.deciding and not loop.state.gave_up
    assert loop.coordinator_health.losses == 3


async def test_a_loop_that_cannot_start_a_coordinator_gives_up(env: Env) -> None:
    await env.create(QUEUES, queue("q"))
    losing = Losing(replaced=False)
    loop = env.loop()
    loop.coordinator_factory = lambda _: losing
    loop.coordinator_health.give_up_after = 0.5
    losing.losses = 10**6
    task = asyncio.create_task(loop.run())
    await asyncio.wait_for(task, 20)  # it stops by itself
    assert loop.state.gave_up and not loop.coordinator_health.deciding
