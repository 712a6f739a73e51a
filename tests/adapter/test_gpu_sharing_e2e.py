"""GPU sharing end to end on the dev cluster: the scheduler loop, its binder and the simulated
kubelet (device plugin, KAI's reservation image, container environment) over real HTTP."""

from __future__ import annotations

from k8s_adapter.gpu_sharing import ReservationSettings
from tests.adapter import gpu_sharing_scenario as scenario
from tests.adapter.conftest import Env, queue
from tests.adapter.test_end_to_end import running

QUEUES = "/apis/scheduling.run.ai/v2/queues"


async def test_two_halves_share_a_reserved_gpu_that_is_released_after_both_finish(env: Env) -> None:
    await env.create(QUEUES, queue("default-queue"))
    setting = scenario.Setting(run_seconds=2, timeout=15)
    loop = env.loop(reservations=ReservationSettings(timeout=10, poll=0.05))
    async with running(loop):
        seen = await scenario.run(env.api, setting)
    assert seen["index"] in {"0", "1", "2", "3", "4", "5", "6", "7"}
    # The reservation pods came and went through the binder; nothing else made any.
    assert loop.reservations.created == 2 and loop.reservations.deleted >= 1
